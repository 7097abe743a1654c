//! `lakelog report access` over access-log tables on the stand-in S3, checked against DuckDB
//! reading the same tables with its own SQL: at least one figure of every section of the report
//! (datasets, ages of the data read, unused datasets, the advisor's stored data), and the
//! template's saved Athena queries, run by DuckDB, against the report's figures.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use access_log_ingest::{Ingestor, ObjectReader, TableTemplate};
use aws_sdk_s3::primitives::ByteStream;
use chrono::NaiveDate;
use fixtures::workload::inventory::InventoryFormat;
use fixtures::workload::{self, LAKE_BUCKET, WEB_BUCKET};
use lake::StorageConfig;
use lakelog_reports::TimeRange;
use lakelog_reports::access::{AGE_BUCKETS, AccessOptions, AccessReport, AgeHistogram, PriceTable};
use lakelog_tests::{StandIn, athena_query, duckdb, in_duckdb};
use serde_json::Value;

/// The table the template's access-pattern queries read.
const ACCESS_LOG_TABLE: &str = "\"${GlueDatabase}\".\"${AccessLogQueryTable}\"";

/// The S3 Inventory table the template's stored-data query reads.
const INVENTORY_TABLE: &str = "\"${GlueDatabase}\".\"${InventoryQueryTable}\"";

/// Operations DuckDB counts as reads and writes (written out here, not taken from lakelog).
const READS: &str = "'REST.GET.OBJECT', 'REST.HEAD.OBJECT', 'REST.COPY.OBJECT_GET', 'REST.COPY.PART_GET'";
const WRITES: &str = "'REST.PUT.OBJECT', 'REST.POST.OBJECT', 'REST.COPY.OBJECT', 'REST.POST.UPLOAD'";

/// The rows of the saved ages query, by the text in column `by`: the six age buckets' reads and
/// the reads of unknown age.
fn read_ages(rows: &[Vec<Value>], by: usize) -> BTreeMap<String, ([u64; 6], u64)> {
    rows.iter()
        .map(|r| {
            let counts = [int(&r[2]), int(&r[3]), int(&r[4]), int(&r[5]), int(&r[6]), int(&r[7])];
            (text(&r[by]), (counts, int(&r[8])))
        })
        .collect()
}

/// Every row of `tables` (Delta tables DuckDB reads), as one parenthesised query.
fn all_rows(tables: &[String]) -> String {
    let scans: Vec<String> = tables
        .iter()
        .map(|t| format!("SELECT * FROM delta_scan('{t}')"))
        .collect();
    format!("({})", scans.join(" UNION ALL "))
}

/// Writes the S3 Inventory list of `bucket` in `lake` under `root`, in `files` data files of
/// `format`, as S3 Inventory fills its destination; returns the list's manifest.
fn write_inventory(
    root: &Path,
    lake: &workload::lake::Lake,
    bucket: &str,
    format: InventoryFormat,
    files: usize,
) -> PathBuf {
    let objects: Vec<_> = lake.inventory.iter().filter(|o| o.bucket == bucket).collect();
    workload::inventory::write(root, bucket, &objects, format, lake.inventory_taken, files).unwrap()
}

/// Parquet lists of both buckets of `lake` written under `root`, each in one data file, and read
/// with `options`' dataset rule.
async fn inventories(
    root: &Path,
    lake: &workload::lake::Lake,
    options: &AccessOptions,
) -> Vec<lakelog_reports::access::Inventory> {
    let mut read = Vec::new();
    for bucket in [LAKE_BUCKET, WEB_BUCKET] {
        let manifest = write_inventory(root, lake, bucket, InventoryFormat::Parquet, 1);
        read.push(
            lakelog_reports::access::Inventory::read(
                manifest.to_str().unwrap(),
                &StorageConfig::default(),
                &options.rule,
            )
            .await
            .unwrap(),
        );
    }
    read
}

/// The Parquet lists under `root` as Athena's S3 Inventory table has them: the lists' rows, in
/// one `dt` partition.
fn inventory_table(root: &Path) -> String {
    format!(
        "(SELECT *, '2024-03-06-01-00' AS dt FROM read_parquet('{}/**/*.parquet'))",
        root.display()
    )
}

fn storage(standin: &StandIn) -> StorageConfig {
    StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    }
}

/// The log objects of `generated` put into a raw-logs bucket and ingested into tables in a lake
/// bucket; returns the tables of [`LAKE_BUCKET`] and [`WEB_BUCKET`].
async fn ingest(standin: &StandIn, generated: &workload::Workload) -> Vec<String> {
    ingest_objects(standin, &generated.objects, "report").await.0
}

/// Puts `objects` (gzipped when their name ends in `.gz`) into a raw-logs bucket and ingests them
/// into tables in a lake bucket, both named after `name`; returns the tables of the two buckets
/// and the rejects table.
async fn ingest_objects(standin: &StandIn, objects: &[workload::LogObject], name: &str) -> (Vec<String>, String) {
    let raw = standin.create_bucket(&format!("{name}-raw")).await.unwrap();
    let lake = standin.create_bucket(&format!("{name}-lake")).await.unwrap();
    for object in objects {
        standin
            .s3()
            .put_object()
            .bucket(&raw)
            .key(format!("{}/{}", object.bucket, object.name))
            .body(ByteStream::from(object.data.clone()))
            .send()
            .await
            .unwrap();
    }
    let template = TableTemplate::parse("table", &format!("s3://{lake}/access_logs/{{bucket}}")).unwrap();
    let rejects = template.default_rejects();
    let reader = ObjectReader::s3(standin.s3());
    let listed = reader.list(&format!("s3://{raw}/")).await.unwrap();
    assert_eq!(listed.len(), objects.len());
    let ingestor = Ingestor::new(template, rejects.clone(), storage(standin), reader, 4);
    for (object, result) in ingestor.ingest(&listed, &lake::Retry::default(), &()).await {
        result.unwrap_or_else(|e| panic!("{object}: {e}"));
    }
    let tables = [LAKE_BUCKET, WEB_BUCKET]
        .iter()
        .map(|b| StandIn::s3_uri(&lake, &format!("access_logs/{b}")))
        .collect();
    (tables, rejects)
}

struct Lake {
    standin: StandIn,
    tables: Vec<String>,
    report: AccessReport,
}

impl Lake {
    /// The workload's 60 days from 2024-03-01 put into a raw-logs bucket, ingested into tables in
    /// a lake bucket, and reported over the 60 days.
    async fn new() -> Lake {
        let standin = StandIn::connect().await.unwrap();
        let generated = workload::generate(NaiveDate::from_ymd_opt(2024, 3, 1).unwrap(), 60);
        let tables = ingest(&standin, &generated).await;
        let storage = storage(&standin);
        let range = TimeRange::parse(Some("2024-03-01"), Some("2024-04-29")).unwrap();
        let options = AccessOptions::new(PriceTable::default_table().unwrap());
        let report = lakelog_reports::access::run(&tables, &storage, &range, &options)
            .await
            .unwrap();
        Lake {
            standin,
            tables,
            report,
        }
    }

    /// How the report reaches the stand-in.
    fn storage(&self) -> StorageConfig {
        storage(&self.standin)
    }

    /// Runs `sql` in DuckDB, where `t` is both tables' rows in the range that did not fail and
    /// `t_all` every row up to the end of the range.
    fn duckdb(&self, sql: &str) -> Vec<Vec<Value>> {
        let sql = format!(
            "WITH t_all AS (SELECT * FROM {} WHERE request_date <= DATE '2024-04-29' \
               AND coalesce(http_status, 0) < 400 AND key IS NOT NULL), \
             t AS (SELECT * FROM t_all WHERE request_date >= DATE '2024-03-01') {sql}",
            all_rows(&self.tables)
        );
        duckdb(self.standin.endpoint(), &sql).unwrap_or_else(|e| panic!("{e:#}\n{sql}"))
    }
}

fn int(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .or_else(|| v.as_f64().map(|f| f as u64))
        .unwrap_or_else(|| panic!("{v} is not a count"))
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_else(|| panic!("{v} is not text")).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duckdb_agrees_with_every_section() {
    let lake = Lake::new().await;
    let report = &lake.report;
    assert_eq!(report.datasets.len(), 6, "{:#?}", report.datasets);

    // Datasets: reads, bytes, writes and readers of every dataset, by key prefix.
    let prefixes: Vec<String> = report
        .datasets
        .iter()
        .map(|d| format!("('{}', '{}')", d.bucket, d.dataset.replace('\'', "''")))
        .collect();
    let rows = lake.duckdb(&format!(
        "SELECT p.bucket, p.prefix, \
           count(*) FILTER (WHERE operation IN ({READS})), \
           coalesce(sum(bytes_sent) FILTER (WHERE operation IN ({READS})), 0), \
           count(*) FILTER (WHERE operation IN ({WRITES})), \
           count(DISTINCT coalesce(requester, '-')) FILTER (WHERE operation IN ({READS})) \
         FROM (VALUES {}) AS p(bucket, prefix) \
         JOIN t ON t.bucket = p.bucket AND starts_with(t.key, p.prefix) GROUP BY 1, 2",
        prefixes.join(", ")
    ));
    let by_duckdb: BTreeMap<(String, String), [u64; 4]> = rows
        .iter()
        .map(|r| {
            (
                (text(&r[0]), text(&r[1])),
                [int(&r[2]), int(&r[3]), int(&r[4]), int(&r[5])],
            )
        })
        .collect();
    for d in &report.datasets {
        assert_eq!(
            by_duckdb[&(d.bucket.clone(), d.dataset.clone())],
            [d.reads, d.read_bytes, d.writes, d.requesters],
            "{} {}",
            d.bucket,
            d.dataset
        );
    }

    // Ages: clicks by the date in their partition, the model by its first write.
    let histogram = |rows: Vec<Vec<Value>>| {
        let mut h = AgeHistogram::default();
        for r in rows {
            h.add(r[0].as_i64().unwrap(), int(&r[1]));
        }
        h
    };
    let clicks = lake.duckdb(&format!(
        "SELECT date_diff('day', CAST(regexp_extract(key, 'dt=([0-9-]{{10}})/', 1) AS DATE), request_date), \
         count(*) FROM t WHERE starts_with(key, 'events/clicks/') AND operation IN ({READS}) GROUP BY 1"
    ));
    let usage = |name: &str| report.datasets.iter().find(|d| d.dataset == name).unwrap();
    assert_eq!(histogram(clicks), usage("events/clicks/").age_days);
    let models = lake.duckdb(&format!(
        "SELECT date_diff('day', CAST(w.first AS DATE), r.request_date), count(*) \
         FROM t r JOIN (SELECT key, min(request_time) AS first FROM t_all WHERE operation IN ({WRITES}) \
                        GROUP BY key) w ON r.key = w.key \
         WHERE starts_with(r.key, 'models/') AND r.operation IN ({READS}) GROUP BY 1"
    ));
    assert_eq!(histogram(models), usage("models/recommender/").age_days);
    assert_eq!(AGE_BUCKETS.len(), 6);

    // Unused: prefixes written but not read in the last 30 days of the range, and their writers.
    let unused = lake.duckdb(&format!(
        "SELECT p.prefix FROM (VALUES {}) AS p(bucket, prefix) JOIN t ON t.bucket = p.bucket \
         AND starts_with(t.key, p.prefix) GROUP BY 1 \
         HAVING count(*) FILTER (WHERE operation IN ({WRITES})) > 0 \
            AND coalesce(max(request_date) FILTER (WHERE operation IN ({READS})), DATE '2024-02-29') \
                <= DATE '2024-04-29' - INTERVAL 30 DAY",
        prefixes.join(", ")
    ));
    let unused: BTreeSet<String> = unused.iter().map(|r| text(&r[0])).collect();
    let reported: BTreeSet<String> = report.unused.iter().map(|u| u.dataset.clone()).collect();
    assert_eq!(unused, reported);
    let writers = lake.duckdb(&format!(
        "SELECT requester, count(*) FROM t WHERE starts_with(key, 'exports/legacy/') \
         AND operation IN ({WRITES}) GROUP BY 1 ORDER BY 2 DESC"
    ));
    let writers: Vec<(String, u64)> = writers.iter().map(|r| (text(&r[0]), int(&r[1]))).collect();
    let reported: Vec<(String, u64)> = report.unused[0]
        .writers
        .iter()
        .map(|w| (w.requester.clone(), w.writes))
        .collect();
    assert_eq!(writers, reported);

    // Advice: the stored data estimated from the logs (keys not expired or deleted since their
    // last write, at their largest logged size), and what lifecycle already moved.
    let stored = lake.duckdb(
        "SELECT prefix, count(*), sum(size), coalesce(sum(size) FILTER (WHERE moved), 0) FROM ( \
           SELECT regexp_extract(key, '^([^/]+/[^/]+/)', 1) AS prefix, max(object_size) AS size, \
             max(request_time) FILTER (WHERE operation IN ('REST.PUT.OBJECT', 'REST.POST.UPLOAD')) AS written, \
             max(request_time) FILTER (WHERE operation IN ('S3.EXPIRE.OBJECT', 'REST.DELETE.OBJECT')) AS removed, \
             coalesce(max(request_time) FILTER (WHERE starts_with(operation, 'S3.TRANSITION')) \
               > max(request_time) FILTER (WHERE operation = 'REST.PUT.OBJECT'), false) AS moved \
           FROM t_all WHERE operation NOT IN ('REST.GET.BUCKET', 'REST.PUT.PART') GROUP BY bucket, key) \
         WHERE removed IS NULL OR written > removed GROUP BY 1",
    );
    let stored: BTreeMap<String, [u64; 3]> = stored
        .iter()
        .map(|r| (text(&r[0]), [int(&r[1]), int(&r[2]), int(&r[3])]))
        .collect();
    for name in ["exports/legacy/", "events/clicks/", "models/recommender/"] {
        let advice = report.advice.iter().find(|a| a.dataset == name).unwrap();
        assert_eq!(
            stored[name],
            [advice.stored_objects, advice.stored_bytes, advice.already_moved_bytes],
            "{name}"
        );
    }
    assert!(report.advice.iter().any(|a| !a.transitions.is_empty()));

    // The template's saved Athena queries, run on each bucket's table with only the table
    // reference changed, give the figures of the report of that table over all its days.
    let (mut advised_datasets, mut findings, mut hot_spots) = (0, 0, 0);
    for table in &lake.tables {
        let query = |id: &str| {
            let sql = athena_query(id, ACCESS_LOG_TABLE, &format!("delta_scan('{table}')")).unwrap();
            duckdb(lake.standin.endpoint(), &in_duckdb(&sql)).unwrap_or_else(|e| panic!("{id}: {e:#}"))
        };
        let options = AccessOptions::new(PriceTable::default_table().unwrap());
        let whole = TimeRange::parse(None, None).unwrap();
        let report = lakelog_reports::access::run(std::slice::from_ref(table), &lake.storage(), &whole, &options)
            .await
            .unwrap();
        let of_bucket = &report.datasets;
        assert!(!of_bucket.is_empty(), "{table}");

        let most_read: BTreeMap<String, [u64; 4]> = query("AccessDatasetsReadMostQuery")
            .iter()
            .map(|r| (text(&r[1]), [int(&r[2]), int(&r[3]), int(&r[4]), int(&r[5])]))
            .collect();
        let want: BTreeMap<String, [u64; 4]> = of_bucket
            .iter()
            .filter(|d| d.reads + d.writes > 0)
            .map(|d| (d.dataset.clone(), [d.reads, d.read_bytes, d.writes, d.requesters]))
            .collect();
        assert_eq!(most_read, want, "{table}: datasets read most");

        let ages = read_ages(&query("AccessReadAgesQuery"), 1);
        let want: BTreeMap<String, ([u64; 6], u64)> = of_bucket
            .iter()
            .filter(|d| d.reads > 0)
            .map(|d| (d.dataset.clone(), (d.age_days.counts(), d.reads_of_unknown_age)))
            .collect();
        assert_eq!(ages, want, "{table}: ages of the data read");

        let per_day: BTreeMap<(String, String), [u64; 3]> = query("AccessReadsPerDayQuery")
            .iter()
            .map(|r| ((text(&r[1]), text(&r[2])), [int(&r[3]), int(&r[4]), int(&r[5])]))
            .collect();
        let want: BTreeMap<(String, String), [u64; 3]> = report
            .days
            .iter()
            .map(|d| {
                (
                    (d.dataset.clone(), d.day.to_string()),
                    [d.reads, d.read_bytes, d.requesters],
                )
            })
            .collect();
        assert!(!want.is_empty(), "{table}: no reads per day");
        assert_eq!(per_day, want, "{table}: reads per dataset and day");

        let unread: BTreeSet<String> = query("AccessUnreadDatasetsQuery").iter().map(|r| text(&r[1])).collect();
        let want: BTreeSet<String> = report.unused.iter().map(|u| u.dataset.clone()).collect();
        assert_eq!(unread, want, "{table}: datasets nobody reads");

        // Hygiene, per check and requester: the report's counts, and its top requesters first.
        let mut found: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
        for r in query("AccessHygieneQuery") {
            found.entry(text(&r[0])).or_default().push((text(&r[1]), int(&r[2])));
        }
        for check in &report.hygiene.checks {
            let rows = found.remove(&check.check).unwrap_or_default();
            let of_check = format!("{table}: hygiene check {}", check.check);
            assert_eq!(rows.iter().map(|r| r.1).sum::<u64>(), check.requests, "{of_check}");
            let top: Vec<(String, u64)> = check
                .requesters
                .iter()
                .map(|r| (r.requester.clone(), r.requests))
                .collect();
            assert_eq!(rows[..top.len()], top, "{of_check}");
        }
        assert!(found.is_empty(), "{table}: checks the report does not make: {found:?}");
        findings += report.hygiene.checks.iter().map(|c| c.requests).sum::<u64>();

        // The 403 hot spots: the report's, most first, with a first request among its samples.
        let refused = query("AccessForbiddenQuery");
        assert!(
            refused.len() >= report.hygiene.forbidden.len(),
            "{table}: 403 hot spots"
        );
        for (row, spot) in refused.iter().zip(&report.hygiene.forbidden) {
            let got = (text(&row[0]), text(&row[1]), text(&row[2]), int(&row[3]));
            let want = (
                spot.bucket.clone(),
                spot.dataset.clone(),
                spot.requester.clone(),
                spot.requests,
            );
            assert_eq!(got, want, "{table}: 403 hot spot");
            assert!(spot.sample_request_ids.contains(&text(&row[6])), "{table}: {row:?}");
        }
        hot_spots += report.hygiene.forbidden.len();

        // Completeness per bucket: counts equal, delays to the millisecond the query counts in.
        let complete = query("AccessLogCompletenessQuery");
        assert_eq!(complete.len(), report.completeness.len(), "{table}: buckets");
        assert!(
            report.completeness.iter().all(|b| b.delivery.median_minutes.is_some()),
            "{table}: delivery delays"
        );
        for (row, bucket) in complete.iter().zip(&report.completeness) {
            let counts = [int(&row[1]), int(&row[2]), int(&row[7]), int(&row[8]), int(&row[9])];
            let want = [
                bucket.records,
                bucket.log_objects,
                bucket.hours,
                bucket.hours_without_records,
                bucket.duplicate_request_ids,
            ];
            assert_eq!(
                (text(&row[0]), counts),
                (bucket.bucket.clone(), want),
                "{table}: completeness"
            );
            let delays = [
                bucket.delivery.median_minutes,
                bucket.delivery.max_minutes,
                bucket.ingestion.median_minutes,
                bucket.ingestion.max_minutes,
            ];
            for (i, want) in delays.iter().enumerate() {
                let got = row[3 + i].as_f64();
                let close = match (got, want) {
                    (Some(g), Some(w)) => (g - w).abs() < 0.001,
                    (g, w) => g.is_none() && w.is_none(),
                };
                assert!(
                    close,
                    "{table}: delay {i} of {}: {got:?} against {want:?}",
                    bucket.bucket
                );
            }
        }

        // The advisor's plan search in SQL: the same transitions, and the same amounts.
        let advised = assert_saved_advice_is_the_reports(&lake.standin, table, &report);
        advised_datasets += advised.len();
    }
    assert!(
        advised_datasets > 0,
        "no table's advice has a transition: the query is not tried"
    );
    assert!(
        findings > 0 && hot_spots > 0,
        "hygiene findings {findings}, 403 hot spots {hot_spots}: a query is not tried"
    );
}

/// A plan as the saved advice query gives it: the days after which data moves to Standard-IA,
/// Glacier Instant Retrieval, Glacier Flexible Retrieval, Deep Archive and Intelligent-Tiering,
/// and the Intelligent-Tiering archive tier it turns on with its days without access.
#[derive(Debug, Clone, PartialEq)]
struct SavedPlan {
    after: [Option<u32>; 5],
    tier: Option<(String, u32)>,
}

/// Runs the template's saved advice query on `table` with DuckDB and checks it advises what
/// `report` (of that table over all its days) does: the same transitions per dataset, and the same
/// amounts (compared unrounded, since the small test lake's savings are a few cents). Returns what
/// it advised.
fn assert_saved_advice_is_the_reports(
    standin: &StandIn,
    table: &str,
    report: &AccessReport,
) -> BTreeMap<String, (SavedPlan, f64, f64)> {
    let sql = athena_query(
        "AccessStorageClassAdviceQuery",
        ACCESS_LOG_TABLE,
        &format!("delta_scan('{table}')"),
    )
    .unwrap()
    .replace("round(b.monthly_saving, 2)", "b.monthly_saving")
    .replace("round(b.one_time_transition_cost, 2)", "b.one_time_transition_cost");
    let amount = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("{v} is not an amount"));
    let days = |v: &Value| v.as_u64().map(|d| d as u32);
    let advised: BTreeMap<String, (SavedPlan, f64, f64)> = duckdb(standin.endpoint(), &sql)
        .unwrap()
        .iter()
        .map(|r| {
            let tier = r[7]
                .as_str()
                .map(|tier| (tier.to_owned(), days(&r[8]).unwrap_or_default()));
            let plan = SavedPlan {
                after: [days(&r[2]), days(&r[3]), days(&r[4]), days(&r[5]), days(&r[6])],
                tier,
            };
            (text(&r[1]), (plan, amount(&r[9]), amount(&r[10])))
        })
        .collect();
    let want: BTreeMap<String, (SavedPlan, f64, f64)> = report
        .advice
        .iter()
        .filter(|a| !a.transitions.is_empty())
        .map(|a| {
            let after = |class: &str| a.transitions.iter().find(|t| t.storage_class == class).map(|t| t.days);
            let plan = SavedPlan {
                after: [
                    after("STANDARD_IA"),
                    after("GLACIER_IR"),
                    after("GLACIER"),
                    after("DEEP_ARCHIVE"),
                    after("INTELLIGENT_TIERING"),
                ],
                tier: a.chosen_archive_tier().map(|t| (t.access_tier.clone(), t.days)),
            };
            (a.dataset.clone(), (plan, a.monthly_saving, a.one_time_transition_cost))
        })
        .collect();
    assert_eq!(
        advised.iter().map(|(k, v)| (k, &v.0)).collect::<Vec<_>>(),
        want.iter().map(|(k, v)| (k, &v.0)).collect::<Vec<_>>(),
        "{table}: storage classes to move to"
    );
    for (dataset, (_, saving, once)) in &advised {
        let (_, want_saving, want_once) = &want[dataset];
        let (want_saving, want_once) = (*want_saving, *want_once);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(
            close(*saving, want_saving) && close(*once, want_once),
            "{table} {dataset}: SQL saves {saving} (once {once}), the report {want_saving} (once {want_once})"
        );
    }
    advised
}

/// `generated` ingested, the report of its [`LAKE_BUCKET`] table over all its days, and what the
/// saved advice query advised on that table (checked to be the report's advice).
async fn advised_alike(
    standin: &StandIn,
    generated: &workload::Workload,
) -> (AccessReport, BTreeMap<String, (SavedPlan, f64, f64)>) {
    let tables = ingest(standin, generated).await;
    let table = &tables[0];
    assert!(table.ends_with(LAKE_BUCKET), "{table}");
    let options = AccessOptions::new(PriceTable::default_table().unwrap());
    let whole = TimeRange::parse(None, None).unwrap();
    let report = lakelog_reports::access::run(std::slice::from_ref(table), &storage(standin), &whole, &options)
        .await
        .unwrap();
    let advised = assert_saved_advice_is_the_reports(standin, table, &report);
    (report, advised)
}

/// The demo lake has a Delta table: neither the report nor the saved query advises its files into
/// Glacier Flexible Retrieval, where the lake's plain files of the same age go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_formats_stay_out_of_glacier_in_the_report_and_the_saved_query() {
    let standin = StandIn::connect().await.unwrap();
    let generated = workload::lake::generate(NaiveDate::from_ymd_opt(2024, 3, 1).unwrap(), 21, 5).workload;
    let (_, advised) = advised_alike(&standin, &generated).await;
    let orders = &advised["warehouse/orders/"].0;
    assert!(
        orders.after[2].is_none()
            && orders.after[3].is_none()
            && orders.tier.is_none()
            && orders.after.iter().any(Option::is_some),
        "{orders:?}"
    );
    let sensors = &advised["raw/sensors/"].0;
    assert!(
        sensors.after[2].is_some() || sensors.after[3].is_some() || sensors.tier.is_some(),
        "{advised:?}"
    );
}

/// Old data read regularly: the report moves it into Intelligent-Tiering (a GB read from Glacier
/// Instant Retrieval would cost more than warming it back) with its Deep Archive Access tier for
/// what nobody reads, and the saved query advises the same to the same amounts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_data_read_regularly_goes_to_intelligent_tiering_in_the_report_and_the_saved_query() {
    let standin = StandIn::connect().await.unwrap();
    let generated = workload::backtest(NaiveDate::from_ymd_opt(2024, 6, 1).unwrap(), 30);
    let (report, advised) = advised_alike(&standin, &generated).await;
    let ticks = &advised["history/ticks/"].0;
    assert_eq!(
        *ticks,
        SavedPlan {
            after: [None, None, None, None, Some(0)],
            tier: Some(("DEEP_ARCHIVE_ACCESS".to_owned(), 365)),
        },
        "{advised:?}"
    );
    let advice = report.advice.iter().find(|a| a.dataset == "history/ticks/").unwrap();
    assert_eq!(advice.stored_objects, 530);
    assert!(
        advice.reason.contains("INTELLIGENT_TIERING after 0 days"),
        "{}",
        advice.reason
    );
}

/// The saved Athena queries group keys into datasets and date them as the report does, on keys of
/// every form the report knows (its own unit tests' keys): each key is its own bucket, read once
/// on the date the report finds in it and once a day later (or twice, when it names no date).
#[test]
fn the_saved_queries_group_and_date_keys_as_the_report_does() {
    let keys = [
        "models/v3/weights file+7.bin",
        "raw/café/81234.json",
        "readme.txt",
        "a//b/c",
        "/leading/slash/x",
        "reports/q=1.csv",
        "reports/2024-06-01.csv",
        "raw%2Fencoded/a%ZZ/x",
        "a/dt%3D2024/b/x",
        "données/é=1/x",
        "events/clicks/dt=2024-06-01/part-00001.snappy.parquet",
        "t/year=2024/month=6/day=9/x.parquet",
        "t/YEAR=2024/MONTH=06/DAY=30/x.parquet",
        "snapshots/customers/2024/06/01/customers.csv.gz",
        "logs/app-2024-02-29.log",
        "backups/20240131/dump.sql",
        "t/dt=20240131/x",
        "spark/ts=2024-01-31 10%3A00%3A00/part-0",
        "a/2024/06/01/b/2023-01-01/x",
        "t/year=2024/month=06/x",
        "ids/120240131/x",
        "files/20240131.bin",
        "a/1234-56-78/x",
        "x/2024/13/y",
        "x/2024/01",
        "logs/2023-02-28T10:00:00/app.log",
    ];
    let rule = lakelog_reports::access::DatasetRule::default();
    let mut rows = Vec::new();
    let mut want_datasets = BTreeMap::new();
    let mut want_ages = BTreeMap::new();
    for (i, key) in keys.iter().enumerate() {
        let bucket = format!("b{i:02}");
        want_datasets.insert(bucket.clone(), rule.dataset(key).to_owned());
        let date = lakelog_reports::access::key_date(key);
        let read_on = date.unwrap_or(NaiveDate::from_ymd_opt(2024, 7, 1).unwrap());
        for day in [read_on, read_on.succ_opt().unwrap()] {
            rows.push(format!(
                "('{bucket}', '{}', 'reader', 'REST.GET.OBJECT', 1, 1, 200, TIMESTAMP '{day} 12:00:00', DATE '{day}')",
                key.replace('\'', "''")
            ));
        }
        let histogram = if date.is_some() { [1, 1, 0, 0, 0, 0] } else { [0; 6] };
        want_ages.insert(bucket, (histogram, if date.is_some() { 0 } else { 2 }));
    }
    let table = format!(
        "(SELECT * FROM (VALUES {}) AS t(bucket, key, requester, operation, bytes_sent, object_size, \
         http_status, request_time, request_date))",
        rows.join(", ")
    );
    let query = |id: &str| {
        let sql = athena_query(id, ACCESS_LOG_TABLE, &table).unwrap();
        duckdb("http://127.0.0.1:9", &sql).unwrap_or_else(|e| panic!("{id}: {e:#}"))
    };
    let datasets: BTreeMap<String, String> = query("AccessDatasetsReadMostQuery")
        .iter()
        .map(|r| (text(&r[0]), text(&r[1])))
        .collect();
    assert_eq!(datasets, want_datasets);
    let ages = read_ages(&query("AccessReadAgesQuery"), 0);
    assert_eq!(ages, want_ages);
}

/// An S3 Inventory read from its destination bucket on S3 (`s3://` manifest, data files by their
/// keys) is the one read from a local copy of that bucket; a missing manifest is a clear error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inventory_on_s3_reads_as_its_local_copy_does() {
    use lakelog_reports::access::{DatasetRule, Inventory};

    let standin = StandIn::connect().await.unwrap();
    let lake = workload::lake::generate(NaiveDate::from_ymd_opt(2024, 3, 1).unwrap(), 6, 9);
    let root = tempfile::tempdir().unwrap();
    let mut manifests = Vec::new();
    for (bucket, format, files) in [
        (LAKE_BUCKET, InventoryFormat::Csv, 2),
        (WEB_BUCKET, InventoryFormat::Parquet, 1),
    ] {
        manifests.push(write_inventory(root.path(), &lake, bucket, format, files));
    }
    // The destination bucket, as S3 Inventory fills it.
    let destination = standin.create_bucket("inventory").await.unwrap();
    let s3 = standin.s3();
    let mut stack = vec![root.path().to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let key = path.strip_prefix(root.path()).unwrap().to_str().unwrap().to_owned();
            s3.put_object()
                .bucket(&destination)
                .key(key)
                .body(ByteStream::from(std::fs::read(&path).unwrap()))
                .send()
                .await
                .unwrap();
        }
    }
    let rule = DatasetRule::default();
    for manifest in &manifests {
        let local = Inventory::read(manifest.to_str().unwrap(), &StorageConfig::default(), &rule)
            .await
            .unwrap();
        let key = manifest.strip_prefix(root.path()).unwrap().to_str().unwrap();
        let url = StandIn::s3_uri(&destination, key);
        let mut remote = Inventory::read(&url, &storage(&standin), &rule).await.unwrap();
        assert_eq!(remote.location, url);
        remote.location = local.location.clone();
        assert_eq!(remote, local, "{url}");
        assert!(local.total.objects > 0);
    }
    // The saved stored-data query, on a Parquet list of the lake bucket (several storage classes)
    // as Athena's S3 Inventory table has it (the list's rows, one `dt` partition), gives the
    // report's objects and bytes per dataset and storage class.
    let lists = tempfile::tempdir().unwrap();
    let manifest = write_inventory(lists.path(), &lake, LAKE_BUCKET, InventoryFormat::Parquet, 2);
    let parquet = Inventory::read(manifest.to_str().unwrap(), &StorageConfig::default(), &rule)
        .await
        .unwrap();
    let listed = inventory_table(lists.path());
    let sql = athena_query("AccessStoredDataQuery", INVENTORY_TABLE, &listed).unwrap();
    let stored: BTreeMap<(String, String), [u64; 2]> = duckdb(standin.endpoint(), &in_duckdb(&sql))
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(text(&r[0]), LAKE_BUCKET);
            ((text(&r[1]), text(&r[2])), [int(&r[3]), int(&r[4])])
        })
        .collect();
    let want: BTreeMap<(String, String), [u64; 2]> = parquet
        .datasets()
        .into_iter()
        .flat_map(|(dataset, storage)| {
            storage
                .by_class
                .into_iter()
                .map(move |(class, count)| ((dataset.clone(), class), [count.objects, count.bytes]))
        })
        .collect();
    assert!(want.keys().any(|(_, class)| class != "STANDARD"), "{want:?}");
    assert_eq!(stored, want, "stored data per dataset and storage class");

    let missing = StandIn::s3_uri(&destination, "nowhere/manifest.json");
    let e = Inventory::read(&missing, &storage(&standin), &rule)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(&missing) && e.contains("cannot read"), "{e}");
}

/// The saved dark-data query, on the access tables and Parquet lists of both buckets as Athena's
/// S3 Inventory table has them, finds the datasets the report with those lists calls dark: stored,
/// and touched by no successful request. The headline's dark bytes are their sum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dark_data_query_finds_the_reports_dark_data() {
    let standin = StandIn::connect().await.unwrap();
    let lake = workload::lake::generate(NaiveDate::from_ymd_opt(2024, 3, 1).unwrap(), 6, 9);
    let tables = ingest(&standin, &lake.workload).await;
    let lists = tempfile::tempdir().unwrap();
    let mut options = AccessOptions::new(PriceTable::default_table().unwrap());
    options.inventories = inventories(lists.path(), &lake, &options).await;
    let report = lakelog_reports::access::run(&tables, &storage(&standin), &TimeRange::default(), &options)
        .await
        .unwrap();
    let stored = report.storage.expect("a report with inventories has a storage section");
    let want: Vec<(String, String, u64, u64)> = stored
        .datasets
        .iter()
        .filter(|d| d.requests == 0)
        .map(|d| (d.bucket.clone(), d.dataset.clone(), d.objects, d.bytes))
        .collect();
    assert!(!want.is_empty(), "the demo lake stores datasets nobody requests");
    assert!(stored.datasets.len() > want.len(), "and datasets somebody does");
    assert_eq!(
        want.iter().map(|d| d.3).sum::<u64>(),
        report.headline.dark_bytes.unwrap()
    );

    let sql = athena_query("AccessDarkDataQuery", ACCESS_LOG_TABLE, &all_rows(&tables))
        .unwrap()
        .replace(INVENTORY_TABLE, &inventory_table(lists.path()));
    let mut found: Vec<(String, String, u64, u64)> = duckdb(standin.endpoint(), &in_duckdb(&sql))
        .unwrap()
        .iter()
        .map(|r| (text(&r[0]), text(&r[1]), int(&r[2]), int(&r[3])))
        .collect();
    let mut want = want;
    // The same rows; the query orders them by bytes, the report's list is of every dataset.
    found.sort();
    want.sort();
    assert_eq!(found, want, "dark datasets: bucket, dataset, objects, bytes");
}

/// S3's JSON form of the logs (as CloudWatch Logs delivers it on to S3: newline-delimited, gzipped),
/// built field by field from the S3 user guide's table, lands in the same rows as the text form
/// and gives the same report. The workload's 51 days in both forms, each ingested into a lake of
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_form_lands_in_the_same_rows_and_gives_the_same_report() {
    use std::io::Write;
    let standin = StandIn::connect().await.unwrap();
    let generated = workload::generate(NaiveDate::from_ymd_opt(2024, 3, 1).unwrap(), workload::MIN_DAYS);
    let json_objects: Vec<workload::LogObject> = generated
        .json_objects
        .iter()
        .map(|o| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&o.data).unwrap();
            workload::LogObject {
                name: format!("{}.gz", o.name),
                data: gz.finish().unwrap(),
                ..o.clone()
            }
        })
        .collect();
    assert!(json_objects.iter().all(|o| o.data.starts_with(&[0x1f, 0x8b])));
    let (text_tables, text_rejects) = ingest_objects(&standin, &generated.objects, "form-text").await;
    let (json_tables, json_rejects) = ingest_objects(&standin, &json_objects, "form-json").await;

    // Every row alike but for the log object it came from and when it was ingested; none twice.
    let rows = |tables: &[String]| format!("(SELECT * EXCLUDE (log_object, ingested_at) FROM {})", all_rows(tables));
    let (text_rows, json_rows) = (rows(&text_tables), rows(&json_tables));
    let compared = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT (SELECT count(*) FROM {text_rows}), (SELECT count(*) FROM {json_rows}), \
                    (SELECT count(*) FROM (SELECT * FROM {text_rows} EXCEPT ALL SELECT * FROM {json_rows})), \
                    (SELECT count(*) FROM (SELECT * FROM {json_rows} EXCEPT ALL SELECT * FROM {text_rows})), \
                    (SELECT count(*) FROM {json_rows} WHERE extra_fields IS NOT NULL)"
        ),
    )
    .unwrap();
    let counts: Vec<u64> = compared[0].iter().map(int).collect();
    let lines: u64 = generated
        .objects
        .iter()
        .map(|o| o.data.iter().filter(|b| **b == b'\n').count() as u64)
        .sum::<u64>()
        - generated.malformed;
    assert_eq!(
        counts,
        [lines, lines, 0, 0, 0],
        "text rows, JSON rows, text only, JSON only, extra"
    );

    // The cut-off JSON record of each web object is rejected with its reason, as the text form's
    // malformed line is.
    let rejects = |table: &str| {
        duckdb(
            standin.endpoint(),
            &format!("SELECT count(*), min(reason) FROM delta_scan('{table}')"),
        )
        .unwrap()
    };
    let (text_rejected, json_rejected) = (rejects(&text_rejects), rejects(&json_rejects));
    assert_eq!(int(&text_rejected[0][0]), generated.malformed);
    assert_eq!(int(&json_rejected[0][0]), generated.malformed);
    assert!(
        text(&json_rejected[0][1]).starts_with("request_time: EOF while parsing"),
        "{json_rejected:?}"
    );

    // The same report, but for the tables it names and when the rows were ingested.
    let storage = storage(&standin);
    let range = TimeRange::parse(Some("2024-03-01"), Some("2024-04-20")).unwrap();
    let options = AccessOptions::new(PriceTable::default_table().unwrap());
    let report = |tables: Vec<String>| {
        let (storage, range, options) = (&storage, &range, &options);
        async move {
            let report = lakelog_reports::access::run(&tables, storage, range, options)
                .await
                .unwrap();
            let mut json = serde_json::to_string(&report).unwrap();
            for table in &tables {
                json = json.replace(table.as_str(), "TABLE");
            }
            let bucket = tables[0].split('/').nth(2).unwrap_or_default().to_owned();
            let mut json: Value = serde_json::from_str(&json.replace(&bucket, "LAKE")).unwrap();
            // How long after the requests they were ingested: when each test ran.
            for bucket in json["completeness"].as_array_mut().unwrap() {
                bucket["ingestion"] = Value::Null;
            }
            json
        }
    };
    let (from_text, from_json) = (report(text_tables).await, report(json_tables).await);
    assert_eq!(from_text["datasets"].as_array().map(Vec::len), Some(6));
    assert_eq!(from_text, from_json);
}

/// Object-level actions on the demo lake with S3 Inventory lists of both buckets: DuckDB, joining
/// the Parquet lists with the tables on its own, finds exactly the objects the report calls
/// unread (no read in the last days of the logs, and at least that old), split the same way into
/// those written before the logs begin and since; no object read in that time is listed; and the
/// Batch Operations manifests hold exactly the listed objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unread_objects_are_those_the_logs_show_unread_and_their_manifests_list_them() {
    use lakelog_reports::access::write_manifests;

    const UNREAD_DAYS: u32 = 3;
    let standin = StandIn::connect().await.unwrap();
    let lake = workload::lake::generate(NaiveDate::from_ymd_opt(2024, 3, 1).unwrap(), 8, 9);
    let tables = ingest(&standin, &lake.workload).await;
    let lists = tempfile::tempdir().unwrap();
    let mut options = AccessOptions::new(PriceTable::default_table().unwrap());
    options.unread_days = Some(UNREAD_DAYS);
    options.inventories = inventories(lists.path(), &lake, &options).await;
    let report = lakelog_reports::access::run(&tables, &storage(&standin), &TimeRange::default(), &options)
        .await
        .unwrap();
    let objects = report.objects.as_ref().expect("asked for with inventories");
    let window = objects.window;
    assert_eq!(objects.unread_days_applied, UNREAD_DAYS);
    assert_eq!(report.headline.logs_first_day, Some(window.first_day.to_string()));

    // DuckDB: each listed object version, its last read and whether it is unread.
    let end = window.last_day.succ_opt().unwrap();
    let truth = duckdb(
        standin.endpoint(),
        &format!(
            "WITH reads AS (SELECT bucket, key, max(request_time) AS last_read FROM {logs} \
               WHERE operation IN ({READS}) AND coalesce(http_status, 0) < 400 \
                 AND request_time < TIMESTAMPTZ '{end} 00:00:00+00' GROUP BY bucket, key), \
             listed AS (SELECT bucket, key, size, last_modified_date AS modified \
               FROM {inventory} WHERE NOT coalesce(is_delete_marker, false)) \
             SELECT l.bucket, l.key, \
                    (r.last_read IS NULL OR r.last_read < TIMESTAMPTZ '{end} 00:00:00+00' - INTERVAL {UNREAD_DAYS} DAY) \
                      AND l.modified <= TIMESTAMPTZ '{end} 00:00:00+00' - INTERVAL {UNREAD_DAYS} DAY AS unread, \
                    l.modified < TIMESTAMPTZ '{first} 00:00:00+00' AS before, l.size \
             FROM listed l LEFT JOIN reads r ON r.bucket = l.bucket AND r.key = l.key",
            logs = all_rows(&tables),
            inventory = inventory_table(lists.path()),
            first = window.first_day,
        ),
    )
    .unwrap();
    let mut unread: BTreeMap<String, [(u64, u64); 2]> = BTreeMap::new();
    let mut status: BTreeMap<(String, String), bool> = BTreeMap::new();
    for row in &truth {
        let (bucket, key) = (text(&row[0]), text(&row[1]));
        let is_unread = row[2].as_bool().unwrap();
        if is_unread {
            let slot = &mut unread.entry(bucket.clone()).or_default()[usize::from(!row[3].as_bool().unwrap())];
            slot.0 += 1;
            slot.1 += int(&row[4]);
        }
        status.insert((bucket, key), is_unread);
    }
    assert!(
        status.values().any(|u| *u) && status.values().any(|u| !*u),
        "both kinds"
    );
    let mut listed = BTreeSet::new();
    for bucket in &objects.buckets {
        let want = unread.get(&bucket.bucket).copied().unwrap_or_default();
        assert_eq!(
            [bucket.unread_before_window, bucket.unread_inside_window],
            want,
            "{}: unread before and inside the window",
            bucket.bucket
        );
        for action in &bucket.actions {
            let key = (action.bucket.clone(), action.key.clone());
            assert_eq!(
                status.get(&key),
                Some(&true),
                "{key:?} is listed but was read or is young"
            );
            assert!(action.costs.net_saving > 0.0 && action.bytes > 0);
            listed.insert(format!("{},{},", action.bucket, action.key));
        }
    }
    assert!(!listed.is_empty(), "the demo lake has objects worth moving");

    // The manifests hold the listed objects, each once (the keys URL-encoded as S3 Batch
    // Operations reads them).
    let dir = tempfile::tempdir().unwrap();
    let written = write_manifests(objects, dir.path()).unwrap();
    let mut in_manifests = BTreeSet::new();
    for path in &written {
        for line in std::fs::read_to_string(path).unwrap().lines() {
            let decoded = percent_encoding::percent_decode_str(line)
                .decode_utf8()
                .unwrap()
                .into_owned();
            assert!(in_manifests.insert(decoded), "{line} twice");
        }
    }
    assert_eq!(in_manifests, listed);
}
