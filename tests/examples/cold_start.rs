//! Cold starts of the four functions' `bootstrap` binaries, run as Lambda runs them against a
//! local Runtime API and the S3/Kinesis stand-in: the size of each function's zip, the time from
//! process start to the first `/next` (init), the latency of the first invocation, and the peak
//! resident memory, over RUNS starts each (default 20).
//!
//! ```text
//! eval "$(scripts/standins start)"
//! sam build --parameter-overrides Architecture=x86_64      # or: make -C build/x86_64 -f ../lambda/Makefile lambdas
//! cargo run --profile local -p lakelog-tests --example cold_start -- .aws-sam/build [RUNS]
//! ```
//!
//! DIR is either SAM's build directory (`<LogicalId>/bootstrap`) or the Makefile's
//! `target/lambda/<architecture>` (`<binary>/bootstrap`). The zip size is the binary compressed with deflate, as
//! a zip stores it (a few hundred bytes of zip headers aside).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use aws_sdk_s3::primitives::ByteStream;
use lakelog_tests::runtime_api::{Answer, Function};
use lakelog_tests::{StandIn, percentile, unique_name};

const WAIT: Duration = Duration::from_secs(120);

/// A function: its binary's name, SAM's logical id, and what it needs to start and answer.
struct Case {
    binary: &'static str,
    logical_id: &'static str,
    vars: Vec<(&'static str, String)>,
    event: Vec<u8>,
}

fn sample(name: &str) -> Result<Vec<u8>> {
    let path = format!("{}/../events/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).with_context(|| path)
}

fn find(dir: &Path, case: &Case) -> Result<PathBuf> {
    for name in [case.logical_id, case.binary] {
        let path = dir.join(name).join("bootstrap");
        if path.exists() {
            return Ok(path);
        }
    }
    bail!("no bootstrap of {} under {}", case.binary, dir.display())
}

fn deflated_size(path: &Path) -> Result<usize> {
    let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(&std::fs::read(path)?)?;
    Ok(encoder.finish()?.len())
}

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().context("usage: cold_start DIR [RUNS]")?);
    let runs: usize = args.next().map(|r| r.parse()).transpose()?.unwrap_or(20);

    let standin = StandIn::connect().await?;
    let endpoint = standin.endpoint().to_owned();
    let lake = standin.create_bucket("cold-lake").await?;
    let raw = standin.create_bucket("cold-raw").await?;
    let stream = unique_name("cold-events");
    let kinesis = aws_sdk_kinesis::Client::new(&standin.sdk_config());
    kinesis
        .create_stream()
        .stream_name(&stream)
        .shard_count(1)
        .send()
        .await?;
    // One small log object for the ingest's notification.
    let key = "access-logs/2024-06-01-00-05-02-5F1E0EXAMPLE";
    let line = "79a59df900b949e55d96a1e698fbacedfd6e09d98eacf8f8d5218e7cd47ef2be web-assets \
                [01/Jun/2024:00:05:01 +0000] 192.0.2.3 - 3E57427F3EXAMPLE REST.GET.OBJECT img/a.png \
                \"GET /web-assets/img/a.png HTTP/1.1\" 200 - 2662992 3462992 70 10 \"-\" \"curl/8.0\" - \
                Ijbo1EXAMPLE= SigV4 ECDHE-RSA-AES128-GCM-SHA256 AuthHeader web-assets.s3.us-east-1.amazonaws.com TLSv1.2 - -\n";
    standin
        .s3()
        .put_object()
        .bucket(&raw)
        .key(key)
        .body(ByteStream::from(line.repeat(100).into_bytes()))
        .send()
        .await?;
    let notification = String::from_utf8(sample("sqs-s3-notification.json")?)?.replace("raw-logs", &raw);
    // Only the first message: the second names an object this run does not upload.
    let mut notification: serde_json::Value = serde_json::from_str(&notification)?;
    if let Some(records) = notification["Records"].as_array_mut() {
        records.truncate(1);
    }

    let cases = [
        Case {
            binary: "game-api-lambda",
            logical_id: "GameEventsApiFunction",
            vars: vec![("GAME_EVENTS_STREAM", stream.clone())],
            event: sample("apigw-batch.json")?,
        },
        Case {
            binary: "game-sink-lambda",
            logical_id: "GameEventsSinkFunction",
            vars: vec![("GAME_EVENTS_TABLE_URI", StandIn::s3_uri(&lake, "game_events"))],
            event: sample("kinesis-game-events.json")?,
        },
        Case {
            binary: "access-log-lambda",
            logical_id: "AccessLogIngestFunction",
            vars: vec![("ACCESS_LOG_TABLE_URI", StandIn::s3_uri(&lake, "access_logs/{bucket}"))],
            event: serde_json::to_vec(&notification)?,
        },
        Case {
            binary: "maintenance-lambda",
            logical_id: "LakeMaintenanceFunction",
            // The tables the ingest case created.
            vars: vec![("LAKE_TABLES", StandIn::s3_uri(&lake, "access_logs/*"))],
            event: sample("scheduled-maintenance.json")?,
        },
    ];

    println!("| function | zip (deflate) | init p50 | init p95 | first invocation p50 | p95 | peak RSS p50 |");
    println!("|---|---|---|---|---|---|---|");
    for case in &cases {
        let binary = match find(&dir, case) {
            Ok(binary) => binary,
            Err(e) => {
                eprintln!("skipped: {e}");
                continue;
            }
        };
        let zip = deflated_size(&binary)?;
        let mut vars: Vec<(&str, String)> = Function::standin_vars(&endpoint);
        vars.extend(case.vars.iter().cloned());
        let vars: Vec<(&str, &str)> = vars.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let (mut init, mut first, mut rss) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..runs {
            let function = Function::start(&binary, &vars)?;
            let took = function
                .init_time(WAIT)
                .map_err(|e| anyhow::anyhow!("{}: no init within {WAIT:?}: {e:?}", case.binary))?;
            let started = Instant::now();
            let answer = tokio::task::block_in_place(|| function.invoke(&case.event, WAIT))?;
            let latency = started.elapsed();
            if let Answer::Error { error_type, body } = &answer {
                bail!("{} run {run}: {error_type}: {body}", case.binary);
            }
            rss.push(function.peak_rss_kib().unwrap_or(0) as f64 / 1024.0);
            function.stop();
            init.push(took.as_secs_f64() * 1000.0);
            first.push(latency.as_secs_f64() * 1000.0);
        }
        for values in [&mut init, &mut first, &mut rss] {
            values.sort_by(f64::total_cmp);
        }
        println!(
            "| {} | {:.1} MB | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} MB |",
            case.binary,
            zip as f64 / 1e6,
            percentile(&init, 0.5).unwrap_or(f64::NAN),
            percentile(&init, 0.95).unwrap_or(f64::NAN),
            percentile(&first, 0.5).unwrap_or(f64::NAN),
            percentile(&first, 0.95).unwrap_or(f64::NAN),
            percentile(&rss, 0.5).unwrap_or(f64::NAN),
        );
    }
    Ok(())
}
