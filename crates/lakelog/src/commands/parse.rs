//! `lakelog parse`: what the parser makes of a user's own log files, as JSON lines.

use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

use access_log_ingest::objects::decompressing;
use access_log_ingest::{ObjectReader, ObjectRef};
use anyhow::Context;
use chrono::{DateTime, NaiveDate, SecondsFormat};
use s3_access_log::{AccessLogRecord, is_blank};
use serde::Serialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::cli::ParseArgs;

/// A parsed line, keyed by the `access_logs` column names.
#[derive(Debug, Serialize)]
pub struct Row<'r> {
    bucket_owner: Option<&'r str>,
    bucket: Option<&'r str>,
    request_time: String,
    remote_ip: Option<&'r str>,
    requester: Option<&'r str>,
    request_id: Option<&'r str>,
    operation: Option<&'r str>,
    key: Option<&'r str>,
    request_uri: Option<&'r str>,
    http_status: Option<i32>,
    error_code: Option<&'r str>,
    bytes_sent: Option<i64>,
    object_size: Option<i64>,
    total_time_ms: Option<i64>,
    turn_around_time_ms: Option<i64>,
    referer: Option<&'r str>,
    user_agent: Option<&'r str>,
    version_id: Option<&'r str>,
    host_id: Option<&'r str>,
    signature_version: Option<&'r str>,
    cipher_suite: Option<&'r str>,
    authentication_type: Option<&'r str>,
    host_header: Option<&'r str>,
    tls_version: Option<&'r str>,
    access_point_arn: Option<&'r str>,
    acl_required: Option<bool>,
    source_region: Option<&'r str>,
    extra_fields: Option<&'r str>,
    request_date: String,
    log_object: &'r str,
    log_line: u64,
}

/// RFC 3339 in UTC, e.g. `2019-02-06T00:00:38Z`.
pub fn rfc3339(micros: i64) -> String {
    DateTime::from_timestamp_micros(micros)
        .map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| micros.to_string())
}

/// `YYYY-MM-DD` of a day count since the epoch.
pub fn iso_date(days: i32) -> String {
    NaiveDate::from_epoch_days(days).map_or_else(|| days.to_string(), |d| d.to_string())
}

impl<'r> Row<'r> {
    /// The row of `r`, parsed from line `log_line` of `log_object`.
    pub fn new(r: &'r AccessLogRecord<'_>, log_object: &'r str, log_line: u64) -> Self {
        Row {
            bucket_owner: r.bucket_owner.as_deref(),
            bucket: r.bucket.as_deref(),
            request_time: rfc3339(r.request_time),
            remote_ip: r.remote_ip.as_deref(),
            requester: r.requester.as_deref(),
            request_id: r.request_id.as_deref(),
            operation: r.operation.as_deref(),
            key: r.key.as_deref(),
            request_uri: r.request_uri.as_deref(),
            http_status: r.http_status,
            error_code: r.error_code.as_deref(),
            bytes_sent: r.bytes_sent,
            object_size: r.object_size,
            total_time_ms: r.total_time_ms,
            turn_around_time_ms: r.turn_around_time_ms,
            referer: r.referer.as_deref(),
            user_agent: r.user_agent.as_deref(),
            version_id: r.version_id.as_deref(),
            host_id: r.host_id.as_deref(),
            signature_version: r.signature_version.as_deref(),
            cipher_suite: r.cipher_suite.as_deref(),
            authentication_type: r.authentication_type.as_deref(),
            host_header: r.host_header.as_deref(),
            tls_version: r.tls_version.as_deref(),
            access_point_arn: r.access_point_arn.as_deref(),
            acl_required: r.acl_required,
            source_region: r.source_region.as_deref(),
            extra_fields: r.extra_fields.as_deref(),
            request_date: iso_date(r.request_date()),
            log_object,
            log_line,
        }
    }
}

/// A line that could not be parsed.
#[derive(Debug, Serialize)]
struct Reject<'r> {
    log_object: &'r str,
    log_line: u64,
    reason: String,
    line: std::borrow::Cow<'r, str>,
}

/// Counts of one `parse` run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Lines printed as rows.
    pub parsed: u64,
    /// Lines printed as rejects.
    pub rejected: u64,
}

/// Parses every line of `reader` (the content of `log_object`), writing rows to `out` and rejects
/// to `err`.
pub async fn parse_stream(
    mut reader: impl AsyncBufRead + Unpin,
    log_object: &str,
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<Counts> {
    let mut counts = Counts::default();
    let mut buf = Vec::with_capacity(4096);
    let mut number = 0u64;
    loop {
        buf.clear();
        let read = reader
            .read_until(b'\n', &mut buf)
            .await
            .with_context(|| format!("{log_object}: cannot read line {}", number + 1))?;
        if read == 0 {
            return Ok(counts);
        }
        number += 1;
        let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if is_blank(line) {
            continue;
        }
        match AccessLogRecord::parse(line) {
            Ok(record) => {
                serde_json::to_writer(&mut *out, &Row::new(&record, log_object, number))?;
                out.write_all(b"\n")?;
                counts.parsed += 1;
            }
            Err(reason) => {
                let reject = Reject {
                    log_object,
                    log_line: number,
                    reason: reason.to_string(),
                    line: String::from_utf8_lossy(line),
                };
                serde_json::to_writer(&mut *err, &reject)?;
                err.write_all(b"\n")?;
                counts.rejected += 1;
            }
        }
    }
}

/// Runs `lakelog parse`.
pub fn run(args: &ParseArgs) -> anyhow::Result<ExitCode> {
    super::runtime()?.block_on(parse_files(args))
}

async fn parse_files(args: &ParseArgs) -> anyhow::Result<ExitCode> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let stderr = io::stderr();
    let mut err = io::BufWriter::new(stderr.lock());
    let mut failed = false;
    for path in &args.files {
        let (object, result) = if path == Path::new("-") {
            let stream = decompressing(Box::pin(tokio::io::stdin())).await;
            ("stdin".to_owned(), stream.map_err(anyhow::Error::from))
        } else {
            let object = ObjectRef::Local(std::path::absolute(path).unwrap_or_else(|_| path.clone()));
            let stream = ObjectReader::local().open(&object).await;
            (object.uri(), stream.map_err(anyhow::Error::from))
        };
        let result = match result.with_context(|| format!("cannot open {}", path.display())) {
            Ok(stream) => parse_stream(tokio::io::BufReader::new(stream), &object, &mut out, &mut err).await,
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            if is_broken_pipe(&e) {
                return Ok(ExitCode::SUCCESS);
            }
            err.flush().ok();
            eprintln!("lakelog parse: {e:#}");
            failed = true;
        }
    }
    match out.flush().and_then(|()| err.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(|json| json.io_error_kind())
                .is_some_and(|kind| kind == io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "o b [06/Feb/2019:01:00:38 +0100] 192.0.2.3 - ID REST.GET.OBJECT a+b%2Fc \
        \"GET /b/a+b%2Fc HTTP/1.1\" 200 - 113 - 7 - \"-\" \"\"\"curl\" - h SigV4 c AuthHeader host TLSv1.2 - Yes -";

    #[tokio::test]
    async fn rows_and_rejects_as_json_lines() {
        let input = format!("{LINE}\r\n\nnot a log line\n{LINE}");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let counts = parse_stream(input.as_bytes(), "file:///x.log", &mut out, &mut err)
            .await
            .unwrap();
        assert_eq!(counts, Counts { parsed: 2, rejected: 1 });
        let rows: Vec<serde_json::Value> = out
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(rows.len(), 2);
        let row = &rows[0];
        assert_eq!(row["request_time"], "2019-02-06T00:00:38Z");
        assert_eq!(row["request_date"], "2019-02-06");
        assert_eq!(row["key"], "a b/c");
        assert_eq!(row["requester"], serde_json::Value::Null);
        assert_eq!(row["user_agent"], "\"\"curl");
        assert_eq!(row["acl_required"], true);
        assert_eq!(row["source_region"], serde_json::Value::Null);
        assert_eq!(row["log_line"], 1);
        assert_eq!(rows[1]["log_line"], 4);
        assert_eq!(row.as_object().unwrap().len(), 31);
        let reject: serde_json::Value = serde_json::from_slice(err.strip_suffix(b"\n").unwrap()).unwrap();
        assert_eq!(reject["log_line"], 3);
        assert_eq!(reject["line"], "not a log line");
        assert_eq!(
            reject["reason"],
            "line has 4 fields, at least 17 expected (requester is missing)"
        );
    }
}
