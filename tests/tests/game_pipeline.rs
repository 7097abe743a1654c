//! The game pipeline end to end on the stand-ins: requests through the API handler into a Kinesis
//! stream, the stream's records through the sink into a Delta table on `s3://`, and the KPIs of
//! `lakelog report game` against figures computed independently from the generated events, and
//! against DuckDB over the same table.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{Context, Result, ensure};
use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use aws_lambda_events::event::kinesis::KinesisEventRecord;
use chrono::{DateTime, Duration, DurationRound, TimeZone, Utc};
use fixtures::game::{Synth, SynthConfig};
use game_api::testing::{SAMPLE_KEY, sample_games};
use game_api::{ApiConfig, KinesisSink, StreamRef, kinesis_client, respond};
use game_events::{GameEvent, PURCHASE_EVENT};
use game_sink::{Config, Sink};
use lake::StorageConfig;
use lakelog_reports::game::{GameReport, game_report};
use lakelog_reports::{ReportSession, TimeRange};
use lakelog_tests::{
    StandIn, StreamRecord, TEMPLATE_GAME_EVENTS, athena_query, duckdb, duckdb_sessions_are_the_report, in_duckdb,
    read_stream, unique_name, unpacked,
};
use serde_json::{Value, json};

/// A request of `events` that API Gateway received at `time`.
fn request(events: &[GameEvent], time: DateTime<Utc>) -> ApiGatewayProxyRequest {
    let body = json!({"events": events}).to_string();
    serde_json::from_value(json!({
        "resource": "/events", "path": "/events", "httpMethod": "POST",
        "headers": {"content-type": "application/json", "x-api-key": SAMPLE_KEY},
        "requestContext": {"httpMethod": "POST", "requestTimeEpoch": time.timestamp_millis(), "requestId": unique_name("req")},
        "body": body, "isBase64Encoded": false
    }))
    .expect("a proxy request")
}

/// What the pipeline must report, computed from the requests as sent.
#[derive(Debug, Default)]
struct Expected {
    events_per_hour: BTreeMap<DateTime<Utc>, i64>,
    bookings_per_hour: BTreeMap<DateTime<Utc>, f64>,
    dau: BTreeMap<String, BTreeSet<String>>,
    late: i64,
    late_ids: BTreeSet<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_through_api_stream_and_sink_give_the_kpis_of_what_was_sent() -> Result<()> {
    let standin = StandIn::connect().await?;
    let bucket = standin.create_bucket("game-lake").await?;
    let sdk = standin.sdk_config();
    let kinesis = kinesis_client(&sdk);
    let stream = unique_name("game-events");
    kinesis
        .create_stream()
        .stream_name(&stream)
        .shard_count(3)
        .send()
        .await?;
    for _ in 0..50 {
        let status = kinesis.describe_stream_summary().stream_name(&stream).send().await?;
        if status.stream_description_summary().map(|s| s.stream_status().as_str()) == Some("ACTIVE") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // Requests at known times: three hours of traffic, then one request four hours later that
    // moves the watermark, then a request stamped back in the first hour: its events are late.
    let start = Utc.with_ymd_and_hms(2024, 6, 1, 10, 0, 0).unwrap();
    let mut synth = Synth::new(SynthConfig {
        seed: 7,
        devices: 40,
        ..SynthConfig::default()
    });
    let mut times: Vec<DateTime<Utc>> = (0..12).map(|i| start + Duration::minutes(15 * i)).collect();
    times.push(start + Duration::hours(7));
    times.push(start + Duration::minutes(20));
    let late_request = times.len() - 1;

    let sink = KinesisSink::new(kinesis.clone(), StreamRef::Name(stream.clone()));
    let config = ApiConfig::default();
    let mut expected = Expected::default();
    let mut sent_ids = BTreeSet::new();
    for (i, time) in times.iter().enumerate() {
        let events = synth.events(25, *time);
        let response = respond(&request(&events, *time), &sample_games(), &sink, &config).await;
        ensure!(response.status_code == 200, "request {i}: {:?}", response.body);
        let body: Value = match &response.body {
            Some(aws_lambda_events::encodings::Body::Text(text)) => serde_json::from_str(text)?,
            other => anyhow::bail!("request {i}: body {other:?}"),
        };
        let ids: Vec<String> = body["results"]
            .as_array()
            .context("results")?
            .iter()
            .map(|r| r["eventId"].as_str().unwrap_or_default().to_owned())
            .collect();
        ensure!(ids.len() == events.len(), "request {i}: one result per event");
        for (event, id) in events.iter().zip(&ids) {
            sent_ids.insert(id.clone());
            let params = event.event_params.clone().unwrap_or_default();
            if let Some(device) = &params.device_id {
                expected
                    .dau
                    .entry(time.date_naive().to_string())
                    .or_default()
                    .insert(device.clone());
            }
            if i == late_request {
                expected.late += 1;
                expected.late_ids.insert(id.clone());
                continue;
            }
            let hour = time.duration_trunc(Duration::hours(1))?;
            *expected.events_per_hour.entry(hour).or_default() += 1;
            if event.event_name == PURCHASE_EVENT {
                *expected.bookings_per_hour.entry(hour).or_default() += params.amount.unwrap_or(0.0);
            }
        }
    }

    // The stream holds every event, once, in the seed's envelope, packed: a request's events in
    // one record.
    let stored = read_stream(&kinesis, &stream).await?;
    let records: Vec<KinesisEventRecord> = stored.iter().map(StreamRecord::to_lambda).collect();
    let events = unpacked(stored);
    ensure!(
        events.len() == sent_ids.len() && records.len() < events.len() / 10,
        "{} records of {} events for {} events sent",
        records.len(),
        events.len(),
        sent_ids.len()
    );
    let mut decoded = BTreeSet::new();
    for r in &events {
        let data: Value = serde_json::from_slice(&r.data)?;
        ensure!(
            data["httpMethod"] == "POST" && data["body"]["eventTime"].is_i64(),
            "{data}"
        );
        decoded.insert(data["body"]["eventId"].as_str().unwrap_or_default().to_owned());
    }
    ensure!(decoded == sent_ids, "the stream's eventIds are the acknowledged ones");

    // The sink, in batches as Lambda would hand them over; the last batch is delivered twice.
    let table = StandIn::s3_uri(&bucket, "game_events");
    let storage = StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    };
    let lake_sink = Sink::open(&Config::new(&table, None)?, &storage).await?;
    let batches: Vec<&[KinesisEventRecord]> = records.chunks(60).collect();
    for batch in batches.iter().chain(batches.last()) {
        let report = lake_sink.process(batch, &lake::Retry::default()).await;
        ensure!(report.retry_from.is_none() && report.rejected == 0, "{report:?}");
    }

    // The KPIs as reported.
    let session = ReportSession::new();
    session
        .register_tables("game_events", std::slice::from_ref(&table), &storage)
        .await?;
    let report: GameReport = game_report(&session, "game_events", &TimeRange::parse(None, None)?).await?;
    let got_events: BTreeMap<DateTime<Utc>, i64> = report
        .all
        .events_per_hour
        .iter()
        .map(|h| (h.window_start, h.count))
        .collect();
    assert_eq!(got_events, expected.events_per_hour);
    let got_bookings: BTreeMap<DateTime<Utc>, f64> = report
        .all
        .bookings_per_hour
        .iter()
        .map(|h| (h.window_start, h.amount))
        .collect();
    assert_eq!(
        got_bookings.keys().collect::<Vec<_>>(),
        expected.bookings_per_hour.keys().collect::<Vec<_>>()
    );
    for (hour, amount) in &expected.bookings_per_hour {
        assert!(
            (got_bookings[hour] - amount).abs() < 1e-6,
            "{hour}: {} vs {amount}",
            got_bookings[hour]
        );
    }
    let got_dau: HashMap<String, i64> = report.all.dau.iter().map(|d| (d.date.to_string(), d.users)).collect();
    let want_dau: HashMap<String, i64> = expected.dau.iter().map(|(d, s)| (d.clone(), s.len() as i64)).collect();
    assert_eq!(got_dau, want_dau);
    assert_eq!(report.all.late_events, expected.late);
    assert!(expected.late > 0);

    // DuckDB over the same table: distinct events (on time and late), bookings, and DAU.
    let scan = format!("delta_scan('{table}')");
    let duck = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT count(DISTINCT \"eventId\") AS events,
                    count(DISTINCT \"eventParams\".device_id) AS users
             FROM {scan}"
        ),
    )?;
    let row = &duck[0];
    assert_eq!(row[0].as_i64(), Some(sent_ids.len() as i64));
    let reported_events: i64 = report.all.events_per_hour.iter().map(|h| h.count).sum::<i64>() + report.all.late_events;
    assert_eq!(row[0].as_i64(), Some(reported_events));
    assert_eq!(row[1].as_i64(), want_dau.values().copied().max());

    // The template's Athena queries, on the same table through DuckDB, give the report's figures.
    let hours = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT strftime(hour, '%Y-%m-%dT%H:%M:%SZ'), events, bookings FROM ({})",
            athena_query("GameEventsPerHourQuery", TEMPLATE_GAME_EVENTS, &scan)?
        ),
    )?;
    let reported_bookings: BTreeMap<DateTime<Utc>, f64> = report
        .all
        .bookings_per_hour
        .iter()
        .map(|h| (h.window_start, h.amount))
        .collect();
    // One hour of a saved query (the hour's text, its events and bookings) against the report.
    let check_hour = |hour: &serde_json::Value, events: &serde_json::Value, bookings: &serde_json::Value| {
        let hour: DateTime<Utc> = hour.as_str().unwrap_or_default().parse()?;
        ensure!(
            events.as_i64() == got_events.get(&hour).copied(),
            "{hour}: {events} events vs {got_events:?}"
        );
        let want = reported_bookings.get(&hour).copied().unwrap_or(0.0);
        let bookings = bookings.as_f64().unwrap_or(f64::NAN);
        ensure!((bookings - want).abs() < 1e-6, "{hour}: bookings {bookings} vs {want}");
        Ok(())
    };
    ensure!(
        hours.len() == got_events.len(),
        "{} hours for {}",
        hours.len(),
        got_events.len()
    );
    for row in &hours {
        check_hour(&row[0], &row[1], &row[2])?;
    }
    // The same per platform.
    let by_platform = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT platform, strftime(hour, '%Y-%m-%dT%H:%M:%SZ'), events, bookings FROM ({})",
            athena_query("GameEventsPerHourByPlatformQuery", TEMPLATE_GAME_EVENTS, &scan)?
        ),
    )?;
    let reported_hours: usize = report.by_platform.values().map(|k| k.events_per_hour.len()).sum();
    ensure!(
        by_platform.len() == reported_hours && report.by_platform.len() > 1,
        "{} platform hours for {reported_hours}",
        by_platform.len()
    );
    for row in &by_platform {
        let platform = row[0].as_str().unwrap_or_default();
        let hour: DateTime<Utc> = row[1].as_str().unwrap_or_default().parse()?;
        let kpis = report
            .by_platform
            .get(platform)
            .ok_or_else(|| anyhow::anyhow!("{platform} is not in the report"))?;
        let events = kpis
            .events_per_hour
            .iter()
            .find(|h| h.window_start == hour)
            .map(|h| h.count);
        ensure!(row[2].as_i64() == events, "{row:?} vs {events:?}");
        let want = kpis
            .bookings_per_hour
            .iter()
            .find(|h| h.window_start == hour)
            .map_or(0.0, |h| h.amount);
        let bookings = row[3].as_f64().unwrap_or(f64::NAN);
        ensure!((bookings - want).abs() < 1e-6, "{row:?}: bookings {bookings} vs {want}");
    }
    let late = duckdb(
        standin.endpoint(),
        &athena_query("GameLateEventsQuery", TEMPLATE_GAME_EVENTS, &scan)?,
    )?;
    ensure!(late[0][0].as_i64() == Some(report.all.late_events), "late: {late:?}");
    // Daily active users in all (no platform) and by platform.
    let dau_rows = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT CAST(day AS VARCHAR), platform, users FROM ({})",
            athena_query("GameDailyActiveUsersQuery", TEMPLATE_GAME_EVENTS, &scan)?
        ),
    )?;
    let mut dau: HashMap<String, i64> = HashMap::new();
    let mut platform_dau = 0;
    for r in &dau_rows {
        let (day, users) = (r[0].as_str().unwrap_or_default(), r[2].as_i64().unwrap_or(-1));
        match r[1].as_str() {
            None => {
                dau.insert(day.to_owned(), users);
            }
            Some(platform) => {
                let reported = report
                    .by_platform
                    .get(platform)
                    .and_then(|k| k.dau.iter().find(|d| d.date.to_string() == day))
                    .map(|d| d.users);
                ensure!(reported == Some(users), "{r:?} vs {reported:?}");
                platform_dau += 1;
            }
        }
    }
    assert_eq!(dau, got_dau);
    let reported_platform_days: usize = report.by_platform.values().map(|k| k.dau.len()).sum();
    ensure!(platform_dau == reported_platform_days, "{dau_rows:?}");

    // Events and bookings per minute (what the report charts for a range of three hours or less):
    // added up per hour, the report's hours.
    let minutes = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT strftime(date_trunc('hour', minute), '%Y-%m-%dT%H:%M:%SZ'), count(*), sum(events), sum(bookings)
             FROM ({}) GROUP BY 1 ORDER BY 1",
            athena_query("GameEventsPerMinuteQuery", TEMPLATE_GAME_EVENTS, &scan)?
        ),
    )?;
    ensure!(minutes.len() == got_events.len(), "{minutes:?} vs {got_events:?}");
    for row in &minutes {
        ensure!(row[1].as_i64().is_some_and(|n| n > 0 && n <= 60), "{row:?}");
        check_hour(&row[0], &row[2], &row[3])?;
    }

    // Revenue by platform and by app version.
    let spend = duckdb(
        standin.endpoint(),
        &athena_query("GameRevenueByPlatformQuery", TEMPLATE_GAME_EVENTS, &scan)?,
    )?;
    let (mut platforms, mut versions) = (Vec::new(), Vec::new());
    for row in &spend {
        match row[0].as_str() {
            Some("platform") => platforms.push(row),
            Some("app_version") => versions.push(row),
            other => anyhow::bail!("unexpected dimension {other:?}"),
        }
    }
    for (rows, reported) in [
        (&platforms, &report.revenue.by_platform),
        (&versions, &report.revenue.by_app_version),
    ] {
        ensure!(
            !rows.is_empty() && rows.len() == reported.len(),
            "{rows:?} vs {reported:?}"
        );
        for (row, of) in rows.iter().zip(reported) {
            let revenue = row[3].as_f64().unwrap_or(f64::NAN);
            ensure!(
                row[1].as_str() == Some(of.name.as_str())
                    && row[2].as_i64() == Some(of.purchases)
                    && (revenue - of.revenue).abs() < 1e-6
                    && row[4].as_i64() == Some(of.paying_users),
                "{row:?} vs {of:?}"
            );
        }
    }

    // Revenue by game and item: a parameter the table keeps in extraParams, read by Athena's
    // json_extract_scalar (DuckDB's json_extract_string), and by the report.
    let by_item = duckdb(
        standin.endpoint(),
        &in_duckdb(&athena_query("GameRevenueByItemQuery", TEMPLATE_GAME_EVENTS, &scan)?),
    )?;
    ensure!(!by_item.is_empty(), "no purchases by item");
    ensure!(
        by_item.len() == report.revenue.by_item.len(),
        "{by_item:?} vs {:?}",
        report.revenue.by_item
    );
    for (row, reported) in by_item.iter().zip(&report.revenue.by_item) {
        ensure!(row[0].as_str() == Some(game_api::testing::SAMPLE_GAME), "{row:?}");
        ensure!(
            row[1].as_str() == Some(reported.name.as_str()),
            "{row:?} vs {reported:?}"
        );
        ensure!(row[2].as_i64() == Some(reported.purchases), "{row:?} vs {reported:?}");
        let revenue = row[3].as_f64().unwrap_or(f64::NAN);
        ensure!((revenue - reported.revenue).abs() < 1e-6, "{row:?} vs {reported:?}");
    }
    ensure!(report.revenue.by_game.len() == 1 && report.revenue.by_game[0].name == game_api::testing::SAMPLE_GAME);

    // Revenue per day, retention and sessions: the template's queries on DuckDB give the
    // report's figures (with DuckDB's names for Athena's epoch and percentile functions).
    let revenue = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT CAST(day AS VARCHAR), active_users, paying_users, revenue, arpdau, arppu FROM ({})",
            athena_query("GameRevenuePerDayQuery", TEMPLATE_GAME_EVENTS, &scan)?
        ),
    )?;
    ensure!(
        revenue.len() == report.revenue.days.len(),
        "{revenue:?} vs {:?}",
        report.revenue.days
    );
    let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() < 1e-6,
        (a, b) => a == b,
    };
    for (row, day) in revenue.iter().zip(&report.revenue.days) {
        ensure!(
            row[0].as_str() == Some(day.date.to_string().as_str()),
            "{row:?} vs {day:?}"
        );
        ensure!(
            row[1].as_i64() == Some(day.active_users) && row[2].as_i64() == Some(day.paying_users),
            "{row:?} vs {day:?}"
        );
        ensure!(
            close(row[3].as_f64(), Some(day.revenue))
                && close(row[4].as_f64(), day.arpdau)
                && close(row[5].as_f64(), day.arppu),
            "{row:?} vs {day:?}"
        );
    }
    ensure!(
        report.revenue.days.iter().any(|d| d.paying_users > 0),
        "some day has purchases"
    );
    let cohorts = duckdb(
        standin.endpoint(),
        &format!(
            "SELECT CAST(cohort AS VARCHAR), platform, devices, day_1, day_7, day_30 FROM ({})",
            athena_query("GameRetentionQuery", TEMPLATE_GAME_EVENTS, &scan)?
        ),
    )?;
    // First-seen day, platform (None: all), devices, and their day-1, day-7 and day-30 returns.
    type CohortRow = (String, Option<String>, i64, [Option<i64>; 3]);
    let mut want: Vec<CohortRow> = cohorts
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap_or_default().to_owned(),
                r[1].as_str().map(str::to_owned),
                r[2].as_i64().unwrap_or(-1),
                [r[3].as_i64(), r[4].as_i64(), r[5].as_i64()],
            )
        })
        .collect();
    let mut got: Vec<CohortRow> = report
        .cohorts
        .iter()
        .map(|c| (c.date.to_string(), c.platform.clone(), c.devices, c.returned))
        .collect();
    want.sort();
    got.sort();
    ensure!(got == want, "cohorts {got:?} vs DuckDB {want:?}");
    ensure!(got.iter().any(|c| c.1.is_some()), "cohorts by platform too");
    // (One day of events: the returns are compared on a planned season in lakelog's report tests.)
    let sessions = duckdb_sessions_are_the_report(standin.endpoint(), &scan, &report.to_json())?;
    ensure!(
        report.sessions.lengths.iter().filter(|(_, n)| *n > 0).count() > 1,
        "sessions of more than one length"
    );
    ensure!(
        sessions.iter().any(|d| d.sessions > d.devices),
        "some device has two sessions"
    );

    // Every saved game query finds the same answer through the table's Iceberg view as through
    // the Delta table: what an engine that reads only Iceberg gets from the same SQL.
    let view = format!("iceberg_scan('{table}/_iceberg')");
    let answer = |id: &str, from: &str| -> anyhow::Result<Vec<String>> {
        let rows = duckdb(
            standin.endpoint(),
            &in_duckdb(&athena_query(id, TEMPLATE_GAME_EVENTS, from)?),
        )?;
        // Sums of floats read in another order may differ in their last bits.
        let cell = |v: &serde_json::Value| match v.as_f64() {
            Some(x) if v.is_f64() => format!("{x:.6}"),
            _ => v.to_string(),
        };
        let mut rows: Vec<String> = rows
            .iter()
            .map(|r| r.iter().map(cell).collect::<Vec<_>>().join("|"))
            .collect();
        rows.sort();
        Ok(rows)
    };
    for id in SAVED_GAME_QUERIES {
        let (delta, iceberg) = (answer(id, &scan)?, answer(id, &view)?);
        // The lifecycle counts only days that have ended, and the pipeline's events are today's;
        // its random events hold no tutorial and no experiment (the funnel and the experiments are
        // compared on planned seasons in lakelog's report tests).
        ensure!(
            !delta.is_empty() || ["GameLifecycleQuery", "GameFunnelQuery", "GameExperimentQuery"].contains(&id),
            "{id} has rows"
        );
        ensure!(delta == iceberg, "{id}: Delta {delta:?}, the Iceberg view {iceberg:?}");
    }
    Ok(())
}

/// The saved queries of `game_events` in template.yaml.
const SAVED_GAME_QUERIES: [&str; 15] = [
    "GameEventsPerHourQuery",
    "GameEventsPerHourByPlatformQuery",
    "GameEventsPerMinuteQuery",
    "GameLateEventsQuery",
    "GameRevenueByItemQuery",
    "GameRevenueByPlatformQuery",
    "GameDailyActiveUsersQuery",
    "GameRevenuePerDayQuery",
    "GameRetentionQuery",
    "GameSessionsPerDayQuery",
    "GameLifecycleQuery",
    "GameFunnelQuery",
    "GameAcquisitionQuery",
    "GameExperimentQuery",
    "GamePathsQuery",
];

/// The answers of one game's requests in the fair-share test: status and `Retry-After` of each,
/// and the `eventId`s the API acknowledged.
#[derive(Debug, Default)]
struct Answers {
    statuses: Vec<(i64, Option<String>)>,
    acknowledged: BTreeSet<String>,
}

/// Sends `requests` requests of `events` events each with `key`, one after another, and collects
/// the answers.
async fn send_as(
    key: &str,
    requests: usize,
    events: usize,
    seed: u64,
    games: &game_api::Games,
    stream: &game_api::testing::LanedStream,
    config: &ApiConfig,
) -> Result<Answers> {
    let mut synth = Synth::new(SynthConfig {
        seed,
        devices: 50,
        ..SynthConfig::default()
    });
    let mut answers = Answers::default();
    for _ in 0..requests {
        let now = Utc::now();
        let mut request = request(&synth.events(events, now), now);
        request
            .headers
            .insert("x-api-key", aws_lambda_events::http::HeaderValue::from_str(key)?);
        let response = respond(&request, games, stream, config).await;
        let retry_after = response
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        answers.statuses.push((response.status_code, retry_after));
        let body: Value = match &response.body {
            Some(aws_lambda_events::encodings::Body::Text(text)) => serde_json::from_str(text)?,
            other => anyhow::bail!("body {other:?}"),
        };
        for result in body["results"].as_array().into_iter().flatten() {
            if result["status"] == "written" {
                answers
                    .acknowledged
                    .insert(result["eventId"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    Ok(answers)
}

/// One game floods the API with 20 times its share of the stream while another sends its usual
/// traffic, on a stream of four bounded shards (1,000 records each, not yet consumed). With a lane
/// each, the flood fills only its own shard: the flooding game gets 429 with `Retry-After` for what
/// does not fit, never a 5xx; every event of the other game is written, and reaches the table
/// through its own shard's sink while the flood's shard still holds its backlog (so it waits for
/// nothing the flood did). Without lanes, the same flood refuses the other game too: the test sees
/// the difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_game_cannot_crowd_out_another() -> Result<()> {
    use game_api::testing::LanedStream;
    use game_api::{Game, Games, Lane};

    const SHARE: usize = 1_000;
    let (flood_key, steady_key) = ("flood-key-0123456789abcdef", "steady-key-0123456789abcdef");
    let games = |flood: Lane, steady: Lane| -> Result<Games> {
        Ok(Games::keys([
            (flood_key.to_owned(), Game::new("flood")?.with_lane(Some(flood))),
            (steady_key.to_owned(), Game::new("steady")?.with_lane(Some(steady))),
        ]))
    };
    let config = ApiConfig {
        delivery: game_api::DeliveryConfig {
            budget: std::time::Duration::from_secs(2),
            first_backoff: std::time::Duration::from_millis(5),
            max_backoff: std::time::Duration::from_millis(20),
            throttled_budget: std::time::Duration::from_millis(100),
        },
        // One event a record: the lanes' capacity is in records.
        record_format: game_api::RecordFormat::Seed,
        ..ApiConfig::default()
    };
    // The flood: 20 times the share, in requests of 500; the steady game: half its share.
    let flood_and_steady = |games: Games, stream: LanedStream| {
        let config = config.clone();
        async move {
            let (flood, steady) = tokio::join!(
                send_as(flood_key, 20 * SHARE / 500, 500, 1, &games, &stream, &config),
                send_as(steady_key, 10, SHARE / 20, 2, &games, &stream, &config),
            );
            Ok::<_, anyhow::Error>((flood?, steady?, stream))
        }
    };

    // Without lanes: both games share every shard, and the flood refuses the steady game too.
    let whole = Lane::new(0, 1).context("a lane")?;
    let (_, steady, _) = flood_and_steady(games(whole, whole)?, LanedStream::new("shared", 4, SHARE)).await?;
    ensure!(
        steady.statuses.iter().any(|(status, _)| *status == 429),
        "without lanes the flood should have crowded out the steady game: {:?}",
        steady.statuses
    );

    // With a lane each.
    let (flood_lane, steady_lane) = (Lane::new(0, 4).context("a lane")?, Lane::new(1, 4).context("a lane")?);
    let (flood, steady, stream) =
        flood_and_steady(games(flood_lane, steady_lane)?, LanedStream::new("laned", 4, SHARE)).await?;
    ensure!(
        steady.statuses.iter().all(|(status, _)| *status == 200),
        "the steady game was refused: {:?}",
        steady.statuses
    );
    ensure!(steady.acknowledged.len() == 10 * SHARE / 20);
    ensure!(
        flood
            .statuses
            .iter()
            .all(|(status, _)| *status == 200 || *status == 429),
        "the flood got something else than 200 or 429: {:?}",
        flood.statuses
    );
    ensure!(
        flood
            .statuses
            .iter()
            .any(|(status, retry_after)| *status == 429 && retry_after.is_some()),
        "{:?}",
        flood.statuses
    );
    ensure!(
        flood.acknowledged.len() == SHARE,
        "the flood's shard took {}",
        flood.acknowledged.len()
    );
    let shards: Vec<(Lane, &game_api::LocalStream)> = stream.shards().collect();
    ensure!(shards[0].1.len() == SHARE && shards[1].1.len() == 10 * SHARE / 20);
    ensure!(shards[2].1.is_empty() && shards[3].1.is_empty());

    // The steady game's shard is drained into the table while the flood's still holds its backlog.
    let standin = StandIn::connect().await?;
    let bucket = standin.create_bucket("fair-lake").await?;
    let table = StandIn::s3_uri(&bucket, "game_events");
    let storage = StorageConfig {
        endpoint: Some(standin.endpoint().to_owned()),
        extra: standin.storage_options(),
    };
    let lake_sink = Sink::open(&Config::new(&table, None)?, &storage).await?;
    let drain = |shard: &game_api::LocalStream| {
        let (lake_sink, batch) = (&lake_sink, shard.drain());
        async move {
            for chunk in batch.chunks(300) {
                let report = lake_sink.process(chunk, &lake::Retry::default()).await;
                ensure!(report.retry_from.is_none() && report.rejected == 0, "{report:?}");
            }
            Ok(())
        }
    };
    drain(shards[1].1).await?;
    ensure!(shards[0].1.len() == SHARE, "the flood's backlog is still waiting");
    let count = |game: &str| -> Result<(i64, i64)> {
        let rows = duckdb(
            standin.endpoint(),
            &format!(
                "SELECT count(*), count(DISTINCT \"eventId\") FROM delta_scan('{table}') WHERE \"gameId\" = '{game}'"
            ),
        )?;
        Ok((rows[0][0].as_i64().unwrap_or(-1), rows[0][1].as_i64().unwrap_or(-1)))
    };
    let steady_rows = steady.acknowledged.len() as i64;
    ensure!(count("steady")? == (steady_rows, steady_rows), "{:?}", count("steady")?);
    ensure!(count("flood")? == (0, 0));
    // Then the flood's backlog: every acknowledged event once, no more.
    drain(shards[0].1).await?;
    let flood_rows = flood.acknowledged.len() as i64;
    ensure!(count("flood")? == (flood_rows, flood_rows), "{:?}", count("flood")?);
    Ok(())
}

/// The same requests sent as two games, one of them pseudonymising `device_id`: none of the raw
/// ids reaches the pseudonymised game's stream (data or partition key) or table, and its report
/// gives the same KPIs that depend on devices (DAU, retention, sessions, revenue) as the raw one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pseudonymised_ids_give_the_same_kpis_and_never_reach_the_stream_or_table() -> Result<()> {
    use game_api::{Game, Games, LocalStream, PartitionKey, Pseudonym};

    let dir = tempfile::tempdir()?;
    let (raw_key, hidden_key) = ("raw-game-key-0123456789", "hidden-game-key-0123456789");
    let games = Games::keys([
        (raw_key.to_owned(), Game::new("raw-game")?),
        (
            hidden_key.to_owned(),
            Game::new("hidden-game")?.with_pseudonym(Some(Pseudonym::new(
                "device_id",
                b"a-pseudonym-key-of-this-test".to_vec(),
            )?)),
        ),
    ]);
    let config = ApiConfig {
        partition_key: PartitionKey::DeviceId,
        ..ApiConfig::default()
    };
    let mut synth = Synth::new(SynthConfig {
        seed: 21,
        devices: 30,
        ..SynthConfig::default()
    });
    let start = Utc.with_ymd_and_hms(2024, 6, 1, 8, 0, 0).unwrap();
    let sent: Vec<(Vec<GameEvent>, DateTime<Utc>)> = (0..16)
        .map(|i| {
            let time = start + Duration::hours(5 * i);
            (synth.events(40, time), time)
        })
        .collect();
    let devices: BTreeSet<String> = sent
        .iter()
        .flat_map(|(events, _)| events.iter().filter_map(|e| e.event_params.as_ref()?.device_id.clone()))
        .collect();
    let mut reports = Vec::new();
    for (game, key) in [("raw", raw_key), ("hidden", hidden_key)] {
        let stream = LocalStream::new(game);
        for (events, time) in &sent {
            let mut request = request(events, *time);
            request
                .headers
                .insert("x-api-key", aws_lambda_events::http::HeaderValue::from_str(key)?);
            let response = respond(&request, &games, &stream, &config).await;
            ensure!(response.status_code == 200, "{game}: {:?}", response.body);
        }
        let records = game_events::packed::unpack_records(&stream.drain()).into_owned();
        if game == "hidden" {
            for record in &records {
                let data = String::from_utf8_lossy(&record.kinesis.data);
                for device in &devices {
                    ensure!(!data.contains(device.as_str()), "a raw device id in the stream: {data}");
                    ensure!(
                        &record.kinesis.partition_key != device,
                        "a raw device id as partition key"
                    );
                }
            }
        }
        let table = dir.path().join(game).join("game_events").display().to_string();
        let storage = StorageConfig::default();
        let sink = Sink::open(&Config::new(&table, None)?, &storage).await?;
        let report = sink.process(&records, &lake::Retry::default()).await;
        ensure!(report.rows == records.len() as u64, "{report:?}");
        let in_table = duckdb(
            "",
            &format!(
                "SELECT count(*) FROM delta_scan('{table}') WHERE eventParams.device_id IN ({})",
                devices.iter().map(|d| format!("'{d}'")).collect::<Vec<_>>().join(", ")
            ),
        )?;
        let raw_rows = in_table[0][0].as_i64().unwrap_or(-1);
        ensure!(
            raw_rows == if game == "raw" { records.len() as i64 } else { 0 },
            "{game}: {raw_rows} rows with a raw device id"
        );
        let session = ReportSession::new();
        session
            .register_tables("game_events", std::slice::from_ref(&table), &storage)
            .await?;
        reports.push(game_report(&session, "game_events", &TimeRange::parse(None, None)?).await?);
    }
    let (raw, hidden) = (&reports[0], &reports[1]);
    ensure!(!raw.all.dau.is_empty() && !raw.cohorts.is_empty());
    assert_eq!(hidden.all.dau, raw.all.dau, "DAU");
    assert_eq!(hidden.cohorts, raw.cohorts, "retention");
    assert_eq!(hidden.sessions, raw.sessions, "sessions");
    // Revenue per day with its active and paying users, to the cent (sums differ in their last
    // bits with the order of the rows; by game, by the games' names).
    let days = |report: &GameReport| -> Vec<_> {
        report
            .revenue
            .days
            .iter()
            .map(|d| {
                (
                    d.date,
                    d.active_users,
                    d.paying_users,
                    (d.revenue * 100.0).round() as i64,
                )
            })
            .collect()
    };
    assert_eq!(days(hidden), days(raw), "revenue");
    assert_eq!(hidden.all.events_per_hour, raw.all.events_per_hour, "events");
    Ok(())
}
