//! `lakelog catalog sync`: register tables and their Iceberg views in the AWS Glue Data Catalog,
//! as the functions do for the tables they create, so that Athena can query tables created before
//! the catalog was set up.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use lake::StorageConfig;
use lake::maintenance::discover_tables;

/// Arguments of `lakelog catalog`.
#[derive(Debug, Args)]
pub struct CatalogArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: CatalogCommand,
}

/// The `catalog` subcommands.
#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Register (or update) tables in a Glue database as Delta tables Athena reads, and their
    /// Iceberg views as Iceberg tables.
    ///
    /// Each TABLE is a table's location (s3://bucket/prefix), or PREFIX/* for every table directly
    /// under the prefix (the per-bucket access-log tables, registered as PARENT_BUCKET). Names
    /// are the locations' last segments: game_events, access_logs_web_assets,
    /// access_logs_rejects; a view is NAME_iceberg, naming the view's newest metadata file (run
    /// sync again after commits made outside the functions, such as `lakelog forget`).
    /// Credentials and region come from the AWS environment.
    Sync(SyncArgs),
}

/// Arguments of `lakelog catalog sync`.
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The Glue database (it must exist; the stack creates one).
    #[arg(long, value_name = "NAME")]
    pub database: String,
    /// Tables or PREFIX/* entries.
    #[arg(required = true, value_name = "TABLE")]
    pub tables: Vec<String>,
}

/// Runs `lakelog catalog`.
pub fn run(args: &CatalogArgs) -> anyhow::Result<ExitCode> {
    let CatalogCommand::Sync(args) = &args.command;
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let storage = StorageConfig::from_env();
        let catalog = catalog::Catalog::from_env(&args.database).await;
        let mut failed = 0;
        for entry in &args.tables {
            let (uris, per_bucket) = match entry.strip_suffix("/*") {
                Some(prefix) => (discover_tables(prefix, &storage).await?, true),
                None => (vec![entry.clone()], false),
            };
            for uri in uris {
                let name = catalog::table_name(&uri, per_bucket);
                let registered = async {
                    let table = lake::Table::open(&uri, &storage).await?;
                    let done = catalog.register(&name, &table).await?;
                    anyhow::Ok(done)
                };
                let said = |done: catalog::Registered| match done {
                    catalog::Registered::Created => "created",
                    catalog::Registered::Updated => "updated",
                    catalog::Registered::Unchanged => "unchanged",
                };
                match registered.await {
                    Ok(done) => {
                        println!("{}.{name}: {uri} ({})", args.database, said(done.table));
                        if let Some(view) = done.view {
                            let view_name = catalog::view_name(&name);
                            println!("{}.{view_name}: {uri} (Iceberg view, {})", args.database, said(view));
                        }
                    }
                    Err(e) => {
                        failed += 1;
                        eprintln!("{uri}: {e:#}");
                    }
                }
            }
        }
        Ok(if failed == 0 {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        })
    })
}
