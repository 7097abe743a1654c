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

use super::sessions::Play;
use crate::error::ReportError;

/// The acquisition parameters, all taken from one event: the earliest with `source`.
pub const ACQUISITION_PARAMS: [&str; 3] = ["source", "campaign", "country"];
/// The parameter naming an experiment a device is in.
pub const EXPERIMENT_PARAM: &str = "experiment";
/// The parameter naming the variant of that experiment the device was given.
pub const VARIANT_PARAM: &str = "variant";
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
    texts: Vec<Box<str>>,
    numbers: HashMap<Box<str>, u32, foldhash::fast::RandomState>,
    /// The tags of the chunk's rows that have some, by row.
    rows: HashMap<u32, Tags, foldhash::fast::RandomState>,
    /// Per device number, its acquisition once found.
    acquisition: Vec<Option<[u32; 3]>>,
    /// Per device and experiment, the variant and the exposure's time (microseconds).
    exposures: HashMap<(u32, u32), (u32, i64), foldhash::fast::RandomState>,
}

impl Attribution {
    fn number(&mut self, text: &str) -> u32 {
        if let Some(&n) = self.numbers.get(text) {
            return n;
        }
        let n = self.texts.len() as u32;
        self.texts.push(text.into());
        self.numbers.insert(text.into(), n);
        n
    }

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
            this.number(&value)
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
    /// exposure to each experiment of each device are kept. The chunk's rows are then forgotten.
    pub(super) fn walk(&mut self, plays: &[Play]) {
        if self.rows.is_empty() {
            return;
        }
        for play in plays {
            let Some(tags) = self.rows.get(&play.row) else { continue };
            let device = play.device as usize;
            if let Some(acquisition) = tags.acquisition {
                if self.acquisition.len() <= device {
                    self.acquisition.resize(device + 1, None);
                }
                self.acquisition[device].get_or_insert(acquisition);
            }
            if let Some((experiment, variant)) = tags.exposure {
                self.exposures
                    .entry((play.device, experiment))
                    .or_insert((variant, play.t));
            }
        }
        self.rows.clear();
    }

    /// The acquisitions and the exposures, as batches of [`ACQUISITION`] and [`EXPOSURES`].
    pub(super) fn batches(self) -> Result<(Vec<RecordBatch>, Vec<RecordBatch>), ReportError> {
        let error = |e: arrow::error::ArrowError| ReportError::column(ACQUISITION, "", e.to_string());
        let text = |n: u32| self.texts.get(n as usize).map(|t| &**t);
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
        let mut exposures: Vec<((u32, u32), (u32, i64))> = self.exposures.iter().map(|(k, v)| (*k, *v)).collect();
        exposures.sort_unstable();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from_iter_values(exposures.iter().map(|((d, _), _)| *d))),
            Arc::new(StringArray::from_iter(exposures.iter().map(|((_, e), _)| text(*e)))),
            Arc::new(StringArray::from_iter(exposures.iter().map(|(_, (v, _))| text(*v)))),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(exposures.iter().map(|(_, (_, t))| *t))
                    .with_timezone("UTC"),
            ),
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
        attribution.walk(&[
            play(0, 1, 0),
            play(0, 2, 1),
            play(1, 1, 2),
            play(1, 2, 3),
            play(1, 3, 4),
            play(1, 4, 5),
        ]);
        // Chunk 2: a later source does not replace device 0's.
        attribution.read(0, r#"{"source":"organic"}"#);
        attribution.walk(&[play(0, 10, 0)]);
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
}
