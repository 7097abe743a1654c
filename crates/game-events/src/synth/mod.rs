//! Seeded generator of realistic game events, like the seed's event generator: score adjustments,
//! purchases with amounts, level-ups, sessions and ad impressions, from many devices on several
//! platforms and app versions. The same seed and the same times always give the same events.

use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value};
use uuid::{Builder, Uuid};

use crate::event::{EventParams, GameEvent, PURCHASE_EVENT};

pub mod season;

/// Event names and their weights in the mix.
pub const EVENT_MIX: [(&str, u32); 6] = [
    ("scoreAdjustment", 50),
    ("levelUp", 12),
    ("adImpression", 12),
    ("sessionStart", 10),
    (PURCHASE_EVENT, 8),
    ("sessionEnd", 8),
];

/// Platforms of the devices, and their weights.
pub const PLATFORMS: [(&str, u32); 4] = [("android", 50), ("ios", 40), ("windows", 6), ("macos", 4)];

/// App versions in use, newest first, and their weights.
pub const APP_VERSIONS: [(&str, u32); 4] = [("1.4.2", 50), ("1.4.1", 25), ("1.3.0", 15), ("1.2.5", 10)];

/// Price points of purchases, and their weights.
pub const PRICES: [(f64, u32); 7] = [
    (0.99, 30),
    (1.99, 20),
    (4.99, 25),
    (9.99, 12),
    (19.99, 8),
    (49.99, 4),
    (99.99, 1),
];

const GAME_KEYWORDS: [&str; 4] = ["league", "ranked", "casual", "tournament"];
const ITEMS: [&str; 5] = ["gems_100", "gems_500", "starter_pack", "season_pass", "skin_dragon"];
const AD_NETWORKS: [&str; 3] = ["admob", "unity_ads", "applovin"];

/// Settings of a generator.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// Seed of the generator.
    pub seed: u64,
    /// Devices (players) the events come from; at least one.
    pub devices: usize,
    /// Whether events carry a client `eventId` (deterministic, from the seed), so that resends are
    /// recognised downstream and tests can match what they sent with what was written.
    pub event_ids: bool,
    /// `eventParams.app_name` of every event.
    pub app_name: String,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            seed: 42,
            devices: 1000,
            event_ids: true,
            app_name: "Lakelog Legends".into(),
        }
    }
}

/// A device: its id, platform and app version never change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// `eventParams.device_id`.
    pub id: String,
    /// `eventParams.platform`.
    pub platform: &'static str,
    /// `eventParams.app_version`.
    pub app_version: &'static str,
}

/// Generates events one at a time.
#[derive(Debug)]
pub struct Synth {
    config: SynthConfig,
    rng: StdRng,
    devices: Vec<Device>,
    generated: u64,
}

fn pick<T: Copy>(rng: &mut StdRng, weighted: &[(T, u32)]) -> T {
    let total: u32 = weighted.iter().map(|(_, w)| w).sum();
    let mut roll = rng.random_range(0..total);
    for (item, weight) in weighted {
        if roll < *weight {
            return *item;
        }
        roll -= weight;
    }
    weighted[weighted.len() - 1].0
}

/// A daily rhythm: 1 at the hour `peak` (UTC), a quarter of that twelve hours away.
pub fn rhythm(hour: u32, peak: u32) -> f64 {
    let phase = (f64::from(hour) - f64::from(peak) + 12.0) / 24.0 * std::f64::consts::TAU;
    0.25 + 0.75 * (0.5 - 0.5 * phase.cos())
}

impl Synth {
    /// A generator for `config`.
    pub fn new(config: SynthConfig) -> Self {
        let mut rng = StdRng::seed_from_u64(config.seed);
        let devices = (0..config.devices.max(1))
            .map(|_| {
                let id = Builder::from_random_bytes(rng.random()).into_uuid();
                Device {
                    id: id.hyphenated().encode_upper(&mut Uuid::encode_buffer()).to_owned(),
                    platform: pick(&mut rng, &PLATFORMS),
                    app_version: pick(&mut rng, &APP_VERSIONS),
                }
            })
            .collect();
        Self {
            config,
            rng,
            devices,
            generated: 0,
        }
    }

    /// The devices events come from.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Events generated so far.
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// The next event, which happened on the client at `client_time`.
    pub fn event(&mut self, client_time: DateTime<Utc>) -> GameEvent {
        self.event_weighted(client_time, |_, _| 1.0)
    }

    /// The next event, from a device drawn as [`Synth::event`] draws them and then kept with the
    /// probability `weight(index, device)` (0 to 1), else drawn again (at most 64 draws, then the
    /// last one is kept): who plays when, as a rhythm per platform or a player base that grows.
    pub fn event_weighted(&mut self, client_time: DateTime<Utc>, weight: impl Fn(usize, &Device) -> f64) -> GameEvent {
        let rng = &mut self.rng;
        // Some players play far more than others: device i is picked with a density falling with i.
        let mut index = 0;
        for _ in 0..64 {
            let u: f64 = rng.random();
            index = ((u * u) * self.devices.len() as f64) as usize % self.devices.len();
            if rng.random::<f64>() < weight(index, &self.devices[index]) {
                break;
            }
        }
        let event_name = pick(rng, &EVENT_MIX);
        self.detailed(index, event_name, client_time)
    }

    /// An event named `event_name` of device `index` at `client_time`, with the generator's
    /// details (scores, levels, prices, networks, extras and the client `eventId`).
    fn detailed(&mut self, index: usize, event_name: &str, client_time: DateTime<Utc>) -> GameEvent {
        self.generated += 1;
        let rng = &mut self.rng;
        let device = &self.devices[index];
        let mut params = EventParams {
            game_keyword: Some(GAME_KEYWORDS[rng.random_range(0..GAME_KEYWORDS.len())].to_owned()),
            app_name: Some(self.config.app_name.clone()),
            platform: Some(device.platform.to_owned()),
            app_version: Some(device.app_version.to_owned()),
            device_id: Some(device.id.clone()),
            client_event_time: Some(client_time.format("%Y-%m-%d %H:%M:%S%.3f").to_string()),
            ..EventParams::default()
        };
        let mut extra = Map::new();
        match event_name {
            "scoreAdjustment" => params.score_adjustment = Some(rng.random_range(-50..=250)),
            "levelUp" => {
                params
                    .extra
                    .insert("level".into(), Value::from(rng.random_range(2..=60)));
            }
            "adImpression" => {
                let network = AD_NETWORKS[rng.random_range(0..AD_NETWORKS.len())];
                params.extra.insert("ad_network".into(), Value::from(network));
            }
            "sessionEnd" => {
                params
                    .extra
                    .insert("session_seconds".into(), Value::from(rng.random_range(30..=3600)));
            }
            PURCHASE_EVENT => {
                params.amount = Some(pick(rng, &PRICES));
                params
                    .extra
                    .insert("item_sku".into(), Value::from(ITEMS[rng.random_range(0..ITEMS.len())]));
                params.extra.insert("currency".into(), Value::from("USD"));
            }
            _ => {}
        }
        if rng.random_bool(0.05) {
            // Clients of older versions send their own, unvalidated, extras.
            extra.insert("sdk".into(), Value::from(format!("unity-{}", device.app_version)));
        }
        let event_id = self
            .config
            .event_ids
            .then(|| Builder::from_random_bytes(rng.random()).into_uuid());
        GameEvent {
            event_name: event_name.to_owned(),
            event_id,
            event_params: Some(params),
            extra,
        }
    }

    /// `count` events that happened at `client_time`.
    pub fn events(&mut self, count: usize, client_time: DateTime<Utc>) -> Vec<GameEvent> {
        (0..count).map(|_| self.event(client_time)).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use super::*;

    fn time() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2024-06-01T12:00:00Z").unwrap().to_utc()
    }

    #[test]
    fn same_seed_same_events() {
        let a = Synth::new(SynthConfig::default()).events(200, time());
        let b = Synth::new(SynthConfig::default()).events(200, time());
        assert_eq!(a, b);
        let c = Synth::new(SynthConfig {
            seed: 7,
            ..SynthConfig::default()
        })
        .events(200, time());
        assert_ne!(a, c);
    }

    #[test]
    fn events_are_valid_and_realistic() {
        let mut synth = Synth::new(SynthConfig {
            devices: 300,
            ..SynthConfig::default()
        });
        let events = synth.events(5000, time());
        let mut names = BTreeMap::new();
        let mut devices = HashSet::new();
        let mut platforms = HashSet::new();
        let mut versions = HashSet::new();
        let mut ids = HashSet::new();
        for event in &events {
            // What the API accepts: the JSON of every generated event passes its validation.
            let json = serde_json::to_value(event).unwrap();
            assert_eq!(&GameEvent::from_value(json).unwrap(), event);
            *names.entry(event.event_name.clone()).or_insert(0) += 1;
            let params = event.event_params.as_ref().unwrap();
            devices.insert(params.device_id.clone().unwrap());
            platforms.insert(params.platform.clone().unwrap());
            versions.insert(params.app_version.clone().unwrap());
            assert!(ids.insert(event.event_id.unwrap()));
            match event.event_name.as_str() {
                PURCHASE_EVENT => assert!(params.amount.unwrap() > 0.0),
                "scoreAdjustment" => assert!((-50..=250).contains(&params.score_adjustment.unwrap())),
                _ => assert_eq!(params.amount, None),
            }
            assert_eq!(params.client_time().unwrap(), Some(time()));
        }
        assert_eq!(names.len(), EVENT_MIX.len(), "{names:?}");
        assert!(names[PURCHASE_EVENT] > 250 && names[PURCHASE_EVENT] < 550, "{names:?}");
        assert!(devices.len() > 250, "{}", devices.len());
        assert_eq!(platforms.len(), PLATFORMS.len());
        assert_eq!(versions.len(), APP_VERSIONS.len());
        assert_eq!(synth.generated(), 5000);
        assert_eq!(synth.devices().len(), 300);
    }

    #[test]
    fn weights_choose_who_plays() {
        let mut synth = Synth::new(SynthConfig {
            devices: 300,
            ..SynthConfig::default()
        });
        let ios = |_: usize, d: &Device| if d.platform == "ios" { 1.0 } else { 0.0 };
        for _ in 0..500 {
            let event = synth.event_weighted(time(), ios);
            assert_eq!(event.event_params.unwrap().platform.as_deref(), Some("ios"));
        }
        // Only the first 10 devices: a player base before the others joined.
        let first: Vec<String> = synth.devices()[..10].iter().map(|d| d.id.clone()).collect();
        for _ in 0..500 {
            let event = synth.event_weighted(time(), |i, _| if i < 10 { 1.0 } else { 0.0 });
            assert!(first.contains(event.event_params.unwrap().device_id.as_ref().unwrap()));
        }
    }

    #[test]
    fn without_client_ids() {
        let mut synth = Synth::new(SynthConfig {
            event_ids: false,
            devices: 0,
            ..SynthConfig::default()
        });
        let event = synth.event(time());
        assert_eq!(event.event_id, None);
        assert_eq!(synth.devices().len(), 1);
    }
}
