//! Kinesis bytes and records of a request of generated game events (`fixtures::game`), with the
//! headers of `events/apigw-batch.json`, in each record format: what the stream bills. The
//! figures are sizes, the same in every build profile.
//!
//! ```sh
//! cargo run -p game-api --example packed_bytes [EVENTS_PER_REQUEST] [REQUESTS]
//! ```

use aws_lambda_events::apigw::ApiGatewayProxyRequest;
use fixtures::game::{Synth, SynthConfig};
use game_api::{ApiConfig, Game, Packs, PartitionKey, RecordFormat, prepare};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let per_request: usize = args.next().map_or(Ok(100), |a| a.parse())?;
    let requests: usize = args.next().map_or(Ok(50), |a| a.parse())?;
    let sample = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../events/apigw-batch.json"))?;
    let mut request: ApiGatewayProxyRequest = serde_json::from_slice(&sample)?;
    let game = Game::new("bench")?;
    let mut synth = Synth::new(SynthConfig {
        seed: 7,
        ..SynthConfig::default()
    });
    let now = chrono::Utc::now();
    let envelope = game_api::envelope(&request).overhead();
    for (format, key) in [
        (RecordFormat::Seed, PartitionKey::Random),
        (RecordFormat::Packed, PartitionKey::Random),
        (RecordFormat::Packed, PartitionKey::DeviceId),
    ] {
        let (mut records, mut bytes, mut billed_kb, mut put_units, mut events) =
            (0usize, 0usize, 0usize, 0usize, 0usize);
        let mut event_bytes = 0usize;
        for _ in 0..requests {
            request.body = Some(serde_json::json!({ "events": synth.events(per_request, now) }).to_string());
            let config = ApiConfig {
                partition_key: key,
                record_format: format,
                ..ApiConfig::default()
            };
            let prepared = prepare(&request, &game, &config, now)?;
            let packs = Packs::new(&prepared.entries, format, key);
            events += prepared.entries.len();
            event_bytes += prepared.entries.iter().map(|e| e.data.len() - envelope).sum::<usize>();
            for entry in &packs.entries {
                let size = entry.size();
                records += 1;
                bytes += size;
                // On-demand bills each record in whole KB; provisioned, in PUT units of 25 KB.
                billed_kb += size.div_ceil(1024);
                put_units += size.div_ceil(25 * 1024);
            }
        }
        println!(
            "{format:?} ({key:?} keys): {:.2} records a request, {:.0} bytes an event ({:.0} of them the stamped \
             event), {:.2} KB billed on demand and {:.3} PUT units an event",
            records as f64 / requests as f64,
            bytes as f64 / events as f64,
            event_bytes as f64 / events as f64,
            billed_kb as f64 / events as f64,
            put_units as f64 / events as f64,
        );
    }
    Ok(())
}
