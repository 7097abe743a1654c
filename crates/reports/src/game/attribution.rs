//! What a device's events say about the device: where it came from (its acquisition) and which
//! variant of each experiment it was given (its exposures).
//!
//! - **Acquisition**: the parameters [`ACQUISITION_PARAMS`] (`source`, `campaign`, `country`) of
//!   the device's earliest event that carries `source` (as an attribution SDK sends them with the
//!   first events of an install); a device without one is `unknown` in all three, as is a missing
//!   `campaign` or `country`.
//! - **Exposures**: each value of [`EXPERIMENT_PARAM`] a device's events carry is an experiment it
//!   is in; its variant is [`VARIANT_PARAM`] of the earliest such event, and that event's time is
//!   its exposure.
//!
//! The parameters are read where the client sent them, in `extraParams` (or `eventParams`, which
//! the table keeps in `extraParams` unless typed). Only the rows whose `extraParams` name one of
//! them are parsed ([`MAY_CARRY`]); a device's earliest is found in the same sorted walk as its
//! sessions, chunk after chunk. What is kept grows with the devices and their experiments.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray, TimestampMicrosecondArray, UInt32Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use arrow::record_batch::RecordBatch;

use super::DAY_MICROS;
use super::sessions::Play;
use super::texts::Texts;
use crate::error::ReportError;

/// The acquisition parameters, all taken from one event: the earliest with `source`.
pub const ACQUISITION_PARAMS: [&str; 3] = ["source", "campaign", "country"];
/// The parameter naming an experiment a device is in.
pub const EXPERIMENT_PARAM: &str = "experiment";
/// The parameter naming the variant of that experiment the device was given.
pub const VARIANT_PARAM: &str = "variant";
/// The days after an exposure's day its device's return is counted on.
pub const RETURN_DAYS: [i64; 2] = [1, 7];
/// What an acquisition parameter or variant reads when it was not sent.
pub const UNKNOWN: &str = "unknown";

/// The SQL condition on a row of the table under which its `extraParams` are read: they may
/// carry an acquisition or an experiment (a JSON object with one of these keys holds its quoted
/// name).
pub(super) const MAY_CARRY: &str =
    r#"strpos("extraParams", '"source"') > 0 OR strpos("extraParams", '"experiment"') > 0"#;

/// The in-memory table of each device's acquisition: `device`, `source`, `campaign`, `country`
/// (devices without one are absent).
pub(super) const ACQUISITION: &str = "__game_kpi_acquisition";
/// The in-memory table of the exposures: `device`, `experiment`, `variant`, `t` (the exposure).
pub(super) const EXPOSURES: &str = "__game_kpi_exposures";

/// What one row says about its device.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Tags {
    /// Its acquisition parameters (as text numbers), if it carries `source`.
    acquisition: Option<[u32; 3]>,
    /// The experiment and variant it carries (as text numbers), if any.
    exposure: Option<(u32, u32)>,
}

/// Gathers the devices' acquisitions and exposures as the chunks come.
#[derive(Debug, Default)]
pub(super) struct Attribution {
    /// Each text read, once, by its number.
    texts: Texts,
    /// The tags of the chunk's rows that have some, by row.
    rows: HashMap<u32, Tags, foldhash::fast::RandomState>,
    /// Per device number, its acquisition once found.
    acquisition: Vec<Option<[u32; 3]>>,
    /// Every exposure, in the order found (its figures after it completed by [`Attribution::finish`]).
    exposures: Vec<Exposure>,
    /// The experiments each device was exposed to already.
    exposure_of: std::collections::HashSet<(u32, u32), foldhash::fast::RandomState>,
    /// Per device number, what the walk carries: its plays so far, its counted purchases so far
    /// and the number of its last conversion.
    tracks: Vec<Track>,
    /// The days with events of each exposed device, from its first exposure on, in order.
    days_of: HashMap<u32, Vec<i64>, foldhash::fast::RandomState>,
    /// The time of the last play walked, in microseconds.
    last: i64,
}

/// What the walk carries of a device, the same for any number of exposures: each play costs the
/// same.
#[derive(Debug, Clone, Copy, Default)]
struct Track {
    plays: u64,
    spent: f64,
    /// The number (from 1) of its last play that was the conversion event.
    converted_at: u64,
}

/// A device's exposure to an experiment, and what it did from it on.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Exposure {
    /// The device's number.
    pub device: u32,
    /// The experiment, as a text number.
    pub experiment: u32,
    /// The variant, as a text number.
    pub variant: u32,
    /// The exposure's time, in microseconds.
    pub t: i64,
    /// The number (from 1) of the exposure among its device's plays.
    play: u64,
    /// Its counted purchases before the exposure (the pre-period).
    pub before: f64,
    /// Its counted purchases from the exposure on.
    pub after: f64,
    /// Whether it did the conversion event at or after the exposure.
    pub converted: bool,
    /// Whether it had an event [`RETURN_DAYS`] after the exposure's day.
    pub returned: [bool; 2],
}

/// What the walk reads of each row of a chunk besides its tags.
#[derive(Debug, Clone, Copy)]
pub(super) struct RowFacts<'a> {
    /// The amount of the row's counted purchase (0 for any other row).
    pub spend: &'a [f64],
    /// Whether the row is the experiments' conversion event.
    pub converts: &'a [bool],
}

impl Attribution {
    /// Reads the `extraParams` text `extra` of the chunk's row `row`.
    pub(super) fn read(&mut self, row: u32, extra: &str) {
        if !(extra.contains("\"source\"") || extra.contains("\"experiment\"")) {
            return;
        }
        let Ok(params) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(extra) else {
            return;
        };
        let text = |key: &str, this: &mut Self| {
            let value = params.get(key).map_or_else(|| UNKNOWN.to_owned(), super::value_text);
            this.texts.number(&value)
        };
        let mut tags = Tags::default();
        if params.contains_key("source") {
            tags.acquisition = Some(ACQUISITION_PARAMS.map(|key| text(key, self)));
        }
        if params.contains_key(EXPERIMENT_PARAM) {
            tags.exposure = Some((text(EXPERIMENT_PARAM, self), text(VARIANT_PARAM, self)));
        }
        if tags != Tags::default() {
            self.rows.insert(row, tags);
        }
    }

    /// Walks one chunk's `plays`, in each device's order: the first acquisition and the first
    /// exposure to each experiment of each device are kept, and what each device bought, whether
    /// it converted and the days it played are carried (`facts` by row). The chunk's rows are then
    /// forgotten.
    pub(super) fn walk(&mut self, plays: &[Play], facts: RowFacts<'_>) {
        for play in plays {
            let (device, row) = (play.device as usize, play.row as usize);
            self.last = self.last.max(play.t);
            if self.tracks.len() <= device {
                self.tracks.resize(device + 1, Track::default());
            }
            let track = &mut self.tracks[device];
            track.plays += 1;
            if let Some(tags) = self.rows.get(&play.row) {
                if let Some(acquisition) = tags.acquisition {
                    if self.acquisition.len() <= device {
                        self.acquisition.resize(device + 1, None);
                    }
                    self.acquisition[device].get_or_insert(acquisition);
                }
                if let Some((experiment, variant)) = tags.exposure
                    && self.exposure_of.insert((play.device, experiment))
                {
                    self.days_of.entry(play.device).or_default();
                    self.exposures.push(Exposure {
                        device: play.device,
                        experiment,
                        variant,
                        t: play.t,
                        play: track.plays,
                        before: track.spent,
                        after: 0.0,
                        converted: false,
                        returned: [false; 2],
                    });
                }
            }
            track.spent += facts.spend.get(row).copied().unwrap_or(0.0);
            if facts.converts.get(row).copied().unwrap_or(false) {
                track.converted_at = track.plays;
            }
            if let Some(days) = self.days_of.get_mut(&play.device) {
                let day = play.t.div_euclid(DAY_MICROS);
                if days.last() != Some(&day) {
                    days.push(day);
                }
            }
        }
        self.rows.clear();
    }

    /// Completes each exposure's figures with what its device did after it, once every chunk was
    /// walked.
    pub(super) fn finish(&mut self) {
        for e in &mut self.exposures {
            let track = self.tracks.get(e.device as usize).copied().unwrap_or_default();
            e.after = track.spent - e.before;
            e.converted = track.converted_at >= e.play;
            let days = self.days_of.get(&e.device).map_or(&[][..], Vec::as_slice);
            let exposed = e.t.div_euclid(DAY_MICROS);
            e.returned = RETURN_DAYS.map(|n| days.binary_search(&(exposed + n)).is_ok());
        }
    }

    /// The exposures found (see [`Attribution::finish`]), the texts their numbers name, and the
    /// time of the last event.
    pub(super) fn exposures(&self) -> (&[Exposure], &Texts, i64) {
        (&self.exposures, &self.texts, self.last)
    }

    /// The acquisitions and the exposures, as batches of [`ACQUISITION`] and [`EXPOSURES`].
    pub(super) fn batches(&self) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>), ReportError> {
        let error = |e: arrow::error::ArrowError| ReportError::column(ACQUISITION, "", e.to_string());
        let text = |n: u32| self.texts.get(n);
        let known: Vec<(u32, [u32; 3])> = self
            .acquisition
            .iter()
            .enumerate()
            .filter_map(|(device, a)| Some((device as u32, (*a)?)))
            .collect();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(UInt32Array::from_iter_values(known.iter().map(|(d, _)| *d)))];
        for k in 0..ACQUISITION_PARAMS.len() {
            columns.push(Arc::new(StringArray::from_iter(known.iter().map(|(_, a)| text(a[k])))));
        }
        let acquisition = RecordBatch::try_new(acquisition_schema(), columns).map_err(error)?;
        let exposures = &self.exposures;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from_iter_values(exposures.iter().map(|e| e.device))),
            Arc::new(StringArray::from_iter(exposures.iter().map(|e| text(e.experiment)))),
            Arc::new(StringArray::from_iter(exposures.iter().map(|e| text(e.variant)))),
            Arc::new(TimestampMicrosecondArray::from_iter_values(exposures.iter().map(|e| e.t)).with_timezone("UTC")),
        ];
        let exposures = RecordBatch::try_new(exposures_schema(), columns).map_err(error)?;
        Ok((vec![acquisition], vec![exposures]))
    }
}

/// The columns of [`ACQUISITION`].
pub(super) fn acquisition_schema() -> SchemaRef {
    Arc::new(Schema::new(
        std::iter::once(Field::new("device", DataType::UInt32, false))
            .chain(ACQUISITION_PARAMS.iter().map(|p| Field::new(*p, DataType::Utf8, true)))
            .collect::<Vec<_>>(),
    ))
}

/// The columns of [`EXPOSURES`].
pub(super) fn exposures_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("device", DataType::UInt32, false),
        Field::new("experiment", DataType::Utf8, true),
        Field::new("variant", DataType::Utf8, true),
        Field::new(
            "t",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;

    #[test]
    fn each_device_keeps_its_first_acquisition_and_its_first_variant_of_each_experiment() {
        let mut attribution = Attribution::default();
        // Chunk 1: device 0's second event has its source; device 1 is exposed twice to one
        // experiment (the first wins) and once to another.
        attribution.read(0, r#"{"level":3}"#);
        attribution.read(1, r#"{"source":"ads","campaign":"launch"}"#);
        attribution.read(2, r#"{"experiment":"price","variant":"b"}"#);
        attribution.read(3, r#"{"experiment":"price","variant":"a"}"#);
        attribution.read(4, r#"{"experiment":"shop","variant":2}"#);
        attribution.read(5, "not json \"source\"");
        let play = |device, t, row| Play { device, t, row };
        let nothing = RowFacts {
            spend: &[],
            converts: &[],
        };
        let plays = [(0, 1, 0), (0, 2, 1), (1, 1, 2), (1, 2, 3), (1, 3, 4), (1, 4, 5)].map(|(d, t, r)| play(d, t, r));
        attribution.walk(&plays, nothing);
        // Chunk 2: a later source does not replace device 0's.
        attribution.read(0, r#"{"source":"organic"}"#);
        attribution.walk(&[play(0, 10, 0)], nothing);
        let (acquisition, exposures) = attribution.batches().unwrap();
        let a = &acquisition[0];
        assert_eq!(a.num_rows(), 1);
        let texts = |batch: &RecordBatch, k: usize| -> Vec<String> {
            batch
                .column(k)
                .as_string::<i32>()
                .iter()
                .map(|t| t.unwrap().to_owned())
                .collect()
        };
        assert_eq!(
            [texts(a, 1), texts(a, 2), texts(a, 3)],
            [["ads"], ["launch"], [UNKNOWN]]
        );
        let e = &exposures[0];
        assert_eq!(texts(e, 1), ["price", "shop"]);
        assert_eq!(texts(e, 2), ["b", "2"]);
    }

    #[test]
    fn an_exposure_counts_what_its_device_did_before_and_after_it() {
        const DAY: i64 = DAY_MICROS;
        let mut attribution = Attribution::default();
        // Device 0: buys for 5 before its exposure (row 1), for 2 and 3 after, converts on day 1
        // after and comes back then, not on day 7. Device 1 is never exposed.
        attribution.read(1, r#"{"experiment":"offer","variant":"b"}"#);
        let spend = [5.0, 0.0, 2.0, 3.0, 7.0];
        let converts = [true, false, false, true, true];
        let facts = RowFacts {
            spend: &spend,
            converts: &converts,
        };
        let play = |device, t, row| Play { device, t, row };
        attribution.walk(
            &[
                play(0, 10, 0),
                play(0, 20, 1),
                play(0, 30, 2),
                play(0, DAY + 5, 3),
                play(1, 40, 4),
            ],
            facts,
        );
        attribution.finish();
        let (exposures, texts, last) = attribution.exposures();
        assert_eq!(last, DAY + 5);
        assert_eq!(exposures.len(), 1);
        let e = &exposures[0];
        assert_eq!(texts.get(e.variant), Some("b"));
        assert_eq!(
            (e.t, e.before, e.after, e.converted, e.returned),
            (20, 5.0, 5.0, true, [true, false])
        );
    }
}
