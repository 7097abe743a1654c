//! What `lakelog check --stack` reads beside its probe: the stack's alarms and their states, how
//! far the sink is behind the stream, and when the maintenance function last went through every
//! table.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_cloudwatch::primitives::DateTime;
use aws_sdk_cloudwatch::types::{Dimension, Statistic};
use lake::StorageConfig;
use maintenance_lambda::rotation::Store;
use serde::Serialize;

/// One of the stack's alarms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Alarm {
    /// Its name (the stack's name, the alarm's, and a suffix CloudFormation chose).
    pub name: String,
    /// `OK`, `ALARM` or `INSUFFICIENT_DATA`.
    pub state: String,
    /// Why it is in that state, as CloudWatch says it.
    pub reason: Option<String>,
}

impl Alarm {
    /// Whether it is firing.
    pub fn firing(&self) -> bool {
        self.state == "ALARM"
    }
}

/// The alarms whose names start with `stack`'s name and a dash: those CloudFormation named for
/// the stack's resources.
pub async fn alarms(cloudwatch: &aws_sdk_cloudwatch::Client, stack: &str) -> Result<Vec<Alarm>, String> {
    let mut pages = cloudwatch
        .describe_alarms()
        .alarm_name_prefix(format!("{stack}-"))
        .into_paginator()
        .send();
    let mut alarms = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| {
            let reason = aws_sdk_cloudwatch::error::DisplayErrorContext(e);
            format!("cannot read the alarms of the stack {stack}: {reason}")
        })?;
        alarms.extend(page.metric_alarms().iter().map(|alarm| {
            Alarm {
                name: alarm.alarm_name().unwrap_or_default().to_owned(),
                state: alarm
                    .state_value()
                    .map_or_else(|| "INSUFFICIENT_DATA".to_owned(), |s| s.as_str().to_owned()),
                reason: alarm.state_reason().map(str::to_owned),
            }
        }));
    }
    alarms.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(alarms)
}

/// How far behind the stream its readers were in the last `window`, in seconds: the largest
/// `GetRecords.IteratorAgeMilliseconds` Kinesis recorded for `stream`; `None` when it recorded
/// none (no reader, or no traffic).
pub async fn stream_age(
    cloudwatch: &aws_sdk_cloudwatch::Client,
    stream: &str,
    window: Duration,
) -> Result<Option<f64>, String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let from = now.saturating_sub(window);
    let answer = cloudwatch
        .get_metric_statistics()
        .namespace("AWS/Kinesis")
        .metric_name("GetRecords.IteratorAgeMilliseconds")
        .dimensions(Dimension::builder().name("StreamName").value(stream).build())
        .start_time(DateTime::from_secs(i64::try_from(from.as_secs()).unwrap_or(0)))
        .end_time(DateTime::from_secs(i64::try_from(now.as_secs()).unwrap_or(i64::MAX)))
        .period(60)
        .statistics(Statistic::Maximum)
        .send()
        .await
        .map_err(|e| {
            let reason = aws_sdk_cloudwatch::error::DisplayErrorContext(e);
            format!("cannot read the age of the stream {stream}: {reason}")
        })?;
    Ok(answer
        .datapoints()
        .iter()
        .filter_map(|point| point.maximum())
        .reduce(f64::max)
        .map(|ms| ms / 1e3))
}

/// When the maintenance function last went through the tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Maintenance {
    /// Tables it has started on.
    pub tables: usize,
    /// When it last went through one of them (RFC 3339), if ever.
    pub last_completed_at: Option<String>,
    /// Hours since the table maintained through longest ago was (what
    /// `TablesNotMaintainedAlarm` watches).
    pub hours_since_oldest: Option<f64>,
}

/// The maintenance function's state in the folder `uri` (its `MAINTENANCE_STATE_URI`); `None`
/// when it has not run yet.
pub async fn maintenance(uri: &str, storage: &StorageConfig) -> Result<Option<Maintenance>, String> {
    let state = Store::open(uri, storage).map_err(|e| e.to_string())?.load().await;
    if state.tables.is_empty() {
        return Ok(None);
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let tables: Vec<String> = state.tables.keys().cloned().collect();
    let last = state.tables.values().filter_map(|t| t.completed).max();
    Ok(Some(Maintenance {
        tables: tables.len(),
        last_completed_at: last
            .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        hours_since_oldest: state.oldest_hours(&tables, now),
    }))
}
