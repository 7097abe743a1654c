//! A simulated year of the game pipeline: the sink's real code (its writers staging Kinesis
//! batches, redelivered as Lambda does; its committer; parking of records the tables could not
//! take before the stream would drop them, and `replay`), maintenance's deduplicating
//! compaction, checkpoints and VACUUM, and an erasure, through 400 days of games on lanes of a
//! stream: a reshard (a parent shard closed, two children), a game moved to another lane, a
//! quiet lane, rejects now and then, a game's day of events packed into one record half of the
//! days (as the API writes a request), committer outages, lost answers, and the faulty store of
//! `store_faults` on a quarter of the days. After each day it checks the protocol's invariants
//! by name; at checkpoints DuckDB counts every event id.
//!
//! `LAKELOG_SIM_SEEDS` and `LAKELOG_SIM_DAYS` as for `simulation`.

use std::collections::BTreeMap;

use aws_lambda_events::event::kinesis::KinesisEventRecord;
use game_events::{Envelope, GameEvent};
use lake::maintenance::{CompactOptions, VacuumOptions};
use lake::{Retry, StorageConfig, Table};
use rand::rngs::SmallRng;
use rand::{Rng as _, SeedableRng as _};

/// The seeds CI runs.
const SEEDS: [u64; 1] = [11];

/// Days each seed lives through.
const DAYS: u32 = 400;

/// Count the rows with DuckDB every this many days (and on the last).
const READ_EVERY: u32 = 100;

/// The committer's outage: longer than VACUUM's retention (zero here).
const OUTAGE: std::ops::Range<u32> = 230..240;

/// The day the parent shard closes and its two children start.
const RESHARD: u32 = 150;

/// The day game `beta` moves from lane 0 to lane 2 (a child of the reshard).
const LANE_MOVE: u32 = 200;

/// The day a player of `alpha` is erased.
const ERASURE: u32 = 300;

const STORMY: f64 = 0.25;
const FAULT_RATE: f64 = 0.05;

/// One shard of the stream: its records so far, and how far its Lambda consumer is.
struct Shard {
    id: String,
    records: Vec<KinesisEventRecord>,
    /// Records before this index were delivered and acknowledged.
    checkpoint: usize,
    /// Open: takes new records.
    open: bool,
}

/// What the world knows.
#[derive(Default)]
struct Truth {
    /// Event ids acknowledged (staged or parked), with their device and the day they were sent.
    events: BTreeMap<String, (String, u32)>,
    /// Sequence numbers of rejects acknowledged, with their partition key.
    rejects: BTreeMap<String, String>,
    /// Devices erased, with the day: their events sent until then are gone.
    erased_devices: BTreeMap<String, u32>,
}

impl Truth {
    /// Whether the event of `device` sent on `day` was erased.
    fn erased(&self, device: &str, day: u32) -> bool {
        self.erased_devices.get(device).is_some_and(|until| day <= *until)
    }
}

fn broke(seed: u64, day: u32, invariant: &str, detail: impl std::fmt::Display) -> ! {
    panic!(
        "game pipeline, seed {seed}, day {day}: invariant {invariant} broken: {detail}\n  replay: \
         LAKELOG_SIM_SEEDS={seed} cargo test -p lakelog-tests --test integration game_simulation"
    )
}

/// The shard game `game` writes to on `day`: its lane, by the day's lane map.
fn lane_of(game: &str, day: u32) -> usize {
    match game {
        "alpha" => 0,
        "beta" if day >= LANE_MOVE => 2,
        "beta" => 0,
        // gamma's lane is the parent shard, then its first child.
        _ if day >= RESHARD => 2,
        _ => 1,
    }
}

/// What a world went through: faults injected, records parked, parked objects replayed.
struct Lived {
    faults: u64,
    parked: usize,
    replayed: usize,
}

/// The world of one seed.
async fn live(seed: u64, days: u32) -> Lived {
    let mut rng = SmallRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let root = dir.path().join("lake");
    std::fs::create_dir_all(&root).expect("the lake's folder");
    let faults = crate::store_faults::register(&root, seed);
    let at = |name: &str| root.join(name).to_str().expect("a UTF-8 path").to_owned();
    let (events_uri, rejects_uri, parked_uri) = (at("game_events"), at("game_events_rejects"), at("parked"));
    let storage = StorageConfig::default();
    let config = game_sink::Config::new(&events_uri, Some(&rejects_uri))
        .expect("the sink's configuration")
        .with_parking(game_sink::Parking::new(&parked_uri, 24).expect("parking"));
    let sink = game_sink::Sink::open(&config, &storage).await.expect("the sink");
    let parked = lake::Folder::open(&parked_uri, &storage).expect("the parking folder");

    let mut shards: Vec<Shard> = (0..4)
        .map(|i| Shard {
            id: format!("shardId-{i:012}"),
            records: Vec::new(),
            checkpoint: 0,
            open: i < 2,
        })
        .collect();
    let mut truth = Truth::default();
    let first = chrono::Utc::now() - chrono::TimeDelta::days(i64::from(days));
    let retry = Retry::default();
    let envelope = Envelope::new(serde_json::Map::new());
    let (mut parked_records, mut replayed) = (0, 0);
    let mut sequence: u128 = 49_000_000_000_000_000_000_000;
    for day in 0..days {
        let time = first + chrono::TimeDelta::days(i64::from(day));
        // The erasure's day is calm, so that everything sent until then is staged before it.
        let stormy = day != ERASURE && rng.random_bool(STORMY);
        faults.set(if stormy { FAULT_RATE } else { 0.0 }, stormy);
        if day == RESHARD {
            shards[1].open = false;
            shards[2].open = true;
            shards[3].open = true;
        }
        // The API: each game's events of the day, into its lane's shard. Gamma's second child
        // lane (shard 3) is quiet: a record every 40 days.
        // Half of the days a game's events go packed, as the API writes a request's events
        // (`lakelog-packed/1`): one record for the day's events, beside the broken ones.
        for (game, per_day) in [("alpha", 6), ("beta", 3), ("gamma", 2)] {
            let shard = lane_of(game, day);
            let mut request: Vec<Vec<u8>> = Vec::new();
            let packs = rng.random_bool(0.5);
            for _ in 0..rng.random_range(0..=per_day) {
                let device = format!("{game}-device-{}", rng.random_range(0..20));
                sequence += rng.random_range(1..1000);
                if rng.random_bool(0.03) {
                    push(
                        &mut shards[shard],
                        &device,
                        sequence,
                        b"{\"not\": \"an event\"".to_vec(),
                        time,
                    );
                    continue;
                }
                let event: GameEvent = serde_json::from_value(serde_json::json!({
                    "eventName": "level_up",
                    "eventParams": {"device_id": device, "platform": "ios"},
                }))
                .expect("an event");
                let data = envelope.record(&event.stamp(time).with_game(game)).expect("a record");
                if packs {
                    request.push(data);
                } else {
                    push(&mut shards[shard], &device, sequence, data, time);
                }
            }
            if !request.is_empty() {
                // A random key, as the API gives a request's record: no device's.
                sequence += 1;
                let data = game_events::packed::pack(request.iter().map(Vec::as_slice));
                push(
                    &mut shards[shard],
                    &format!("{game}-request-{sequence}"),
                    sequence,
                    data,
                    time,
                );
            }
        }
        if day % 40 == 7 && day >= RESHARD {
            sequence += 1;
            push(&mut shards[3], "gamma-quiet", sequence, b"{}".to_vec(), time);
        }
        // Lambda's consumers: each shard's records after its checkpoint, in one batch; what the
        // sink names for redelivery comes again, and a lost answer redelivers the whole batch.
        for shard in &mut shards {
            let batch = &shard.records[shard.checkpoint..];
            if batch.is_empty() {
                continue;
            }
            let report = sink.stage(batch).await;
            parked_records += report.parked;
            if day != ERASURE && rng.random_bool(0.05) {
                continue;
            }
            let done = report.redeliver_from(batch).unwrap_or(batch.len());
            for record in &batch[..done] {
                acknowledge(&mut truth, record, first);
            }
            shard.checkpoint += done;
        }
        // The committer.
        if !OUTAGE.contains(&day) {
            let pass = sink.commit_staged(&retry).await;
            if let Some(error) = pass.failures().next()
                && !stormy
            {
                broke(seed, day, "committer_progresses", error);
            }
        }
        // Parked records are replayed now and then (`lakelog replay`).
        if day % 30 == 29 {
            let names = parked.list().await.unwrap_or_default();
            for name in names {
                match sink.replay(&parked, &name, &retry).await {
                    Ok(_) => replayed += 1,
                    Err(e) if !stormy => {
                        broke(seed, day, "acknowledged_exactly_once", format!("replay of {name}: {e}"))
                    }
                    Err(_) => {}
                }
            }
        }
        // Maintenance: a deduplicating compaction of closed days, a checkpoint, VACUUM.
        if day % 7 == 3 {
            for uri in [&events_uri, &rejects_uri] {
                let Ok(mut table) = Table::open(uri, &storage).await else {
                    continue;
                };
                let options = CompactOptions {
                    dedup_key: (uri == &events_uri).then(|| "gameId+eventId".to_owned()),
                    now: chrono::Utc::now(),
                    ..CompactOptions::default()
                };
                let vacuum = VacuumOptions {
                    retention: chrono::TimeDelta::zero(),
                    force: true,
                    dry_run: false,
                    full: true,
                };
                let steps = async {
                    table.compact(&options, &()).await?;
                    table.checkpoint(true).await?;
                    table.vacuum(&vacuum).await
                };
                if let Err(e) = steps.await
                    && !stormy
                {
                    broke(seed, day, "maintenance_runs", e);
                }
            }
        }
        if day == ERASURE {
            faults.set(0.0, false);
            let device = truth
                .events
                .values()
                .map(|(d, _)| d)
                .find(|d| d.starts_with("alpha"))
                .cloned()
                .expect("an alpha device");
            let request = game_sink::erasure::ErasureRequest::new(
                "simulation",
                "alpha".into(),
                vec![device.clone()],
                "device_id".into(),
            )
            .expect("a request");
            let targets = game_sink::erasure::ErasureTargets {
                events_table: events_uri.clone(),
                rejects_table: Some(rejects_uri.clone()),
                parked: Some(parked_uri.clone()),
            };
            let receipt = game_sink::erasure::forget(&targets, &storage, &request, std::time::Duration::ZERO)
                .await
                .unwrap_or_else(|e| broke(seed, day, "erased_ids_in_no_file", e));
            if !receipt.verified {
                broke(
                    seed,
                    day,
                    "erased_ids_in_no_file",
                    format!("{:?}", receipt.unverified_because),
                );
            }
            truth.erased_devices.insert(device, day);
        }
        // The next tick, in calm.
        faults.set(0.0, false);
        if !OUTAGE.contains(&day) {
            let pass = sink.commit_staged(&retry).await;
            if let Some(error) = pass.failures().next() {
                broke(seed, day, "committer_progresses", error);
            }
            for table in pass.done() {
                if table.stranded > 0 {
                    broke(seed, day, "positions_are_known", format!("{table:?}"));
                }
            }
        }
        if (day + 1) % READ_EVERY == 0 || day + 1 == days {
            check(seed, day, &sink, &parked, &truth, &events_uri, &rejects_uri).await;
        }
    }
    Lived {
        faults: faults.injected.load(std::sync::atomic::Ordering::Relaxed),
        parked: parked_records,
        replayed,
    }
}

fn push(shard: &mut Shard, key: &str, sequence: u128, data: Vec<u8>, time: chrono::DateTime<chrono::Utc>) {
    assert!(shard.open, "{} is closed", shard.id);
    shard.records.push(
        lakelog_tests::StreamRecord {
            shard_id: shard.id.clone(),
            sequence_number: sequence.to_string(),
            partition_key: key.to_owned(),
            data,
            arrival: time,
        }
        .to_lambda(),
    );
}

/// Records what the sink holds of an acknowledged record: its event, or each event a packed
/// record holds, or a reject.
fn acknowledge(truth: &mut Truth, record: &KinesisEventRecord, first: chrono::DateTime<chrono::Utc>) {
    for one in game_events::packed::unpack_records(std::slice::from_ref(record)).iter() {
        acknowledge_one(truth, one, first);
    }
}

fn acknowledge_one(truth: &mut Truth, record: &KinesisEventRecord, first: chrono::DateTime<chrono::Utc>) {
    match game_events::decode_record(&record.kinesis.data) {
        Ok(event) => {
            // Rounded: the stamp keeps milliseconds, the world's first day its nanoseconds.
            let day = (event.event_time - first + chrono::TimeDelta::hours(12)).num_days() as u32;
            let device = event.event_params.as_ref().and_then(|p| p.device_id.clone());
            truth.events.insert(
                event.event_id.to_string(),
                (device.unwrap_or_else(|| record.kinesis.partition_key.clone()), day),
            );
        }
        Err(_) => {
            truth.rejects.insert(
                record.kinesis.sequence_number.clone(),
                record.kinesis.partition_key.clone(),
            );
        }
    }
}

/// Every acknowledged event is in `game_events` exactly once (or parked, waiting for its replay),
/// every reject in the rejects table once, and no erased device's row is left.
async fn check(
    seed: u64,
    day: u32,
    sink: &game_sink::Sink,
    parked: &lake::Folder,
    truth: &Truth,
    events_uri: &str,
    rejects_uri: &str,
) {
    // What waits is committed and every parked object replayed first, as the next passes and
    // the operator would.
    for name in parked.list().await.unwrap_or_default() {
        if let Err(e) = sink.replay(parked, &name, &Retry::default()).await {
            broke(seed, day, "acknowledged_exactly_once", format!("replay of {name}: {e}"));
        }
    }
    if let Err(e) = sink.commit_staged(&Retry::default()).await.both() {
        broke(seed, day, "committer_progresses", e);
    }
    let counts = |sql: String| {
        lakelog_tests::duckdb("", &sql)
            .unwrap_or_else(|e| broke(seed, day, "independent_reader_reads", e))
            .into_iter()
            .filter_map(|row| Some((row[0].as_str()?.to_owned(), row[1].as_i64()?)))
            .collect::<BTreeMap<String, i64>>()
    };
    let found = counts(format!(
        "SELECT CAST(eventId AS VARCHAR), count(*) FROM delta_scan('{events_uri}') GROUP BY 1"
    ));
    let expected = truth
        .events
        .iter()
        .filter(|(_, (device, sent))| !truth.erased(device, *sent))
        .map(|(id, _)| id);
    if let Err(e) = crate::simulation::exactly_once(&found, expected, "game_events") {
        broke(seed, day, "acknowledged_exactly_once", e);
    }
    let erased: Vec<&String> = found
        .keys()
        .filter(|id| truth.events.get(*id).is_some_and(|(d, sent)| truth.erased(d, *sent)))
        .collect();
    if !erased.is_empty() {
        broke(
            seed,
            day,
            "erased_ids_in_no_file",
            format!("events of erased devices read back: {erased:?}"),
        );
    }
    let rejects = counts(format!(
        "SELECT sequenceNumber, count(*) FROM delta_scan('{rejects_uri}') GROUP BY 1"
    ));
    let expected_rejects = truth
        .rejects
        .iter()
        .filter(|(_, key)| !truth.erased_devices.contains_key(*key))
        .map(|(seq, _)| seq);
    if let Err(e) = crate::simulation::exactly_once(&rejects, expected_rejects, "the rejects table") {
        broke(seed, day, "acknowledged_exactly_once", e);
    }
    // Each table's Iceberg view, brought up to date as the maintenance pass would, reads the same
    // rows as its Delta log.
    for uri in [events_uri, rejects_uri] {
        let mirrored = match Table::open(uri, &StorageConfig::default()).await {
            Ok(table) => table
                .mirror_iceberg(lake::iceberg_view::DEFAULT_HISTORY)
                .await
                .map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = mirrored {
            broke(seed, day, "iceberg_view_mirrors", e);
        }
        match lakelog_tests::view_difference(None, uri) {
            Ok(None) => {}
            Ok(Some(difference)) => broke(seed, day, "iceberg_view_mirrors", difference),
            Err(e) => broke(seed, day, "independent_reader_reads", e),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_year_of_the_game_pipeline_keeps_every_invariant() {
    let days = crate::simulation::days(DAYS);
    for seed in crate::simulation::seeds(&SEEDS) {
        let started = std::time::Instant::now();
        let lived = live(seed, days).await;
        eprintln!(
            "game pipeline simulation: seed {seed}, {days} days in {:.1} s ({:.1} simulated days/s), {} faults \
             injected, {} records parked, {} parked objects replayed",
            started.elapsed().as_secs_f64(),
            f64::from(days) / started.elapsed().as_secs_f64(),
            lived.faults,
            lived.parked,
            lived.replayed,
        );
        assert!(
            days < 100 || lived.parked > 0,
            "no record was parked: the parking path went untried"
        );
    }
}
