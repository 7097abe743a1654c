//! One module per subcommand.

pub mod generate;
pub mod ingest;
pub mod parse;
