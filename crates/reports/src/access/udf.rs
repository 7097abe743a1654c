//! SQL functions of the access report, so the dataset rule and key dates run inside DataFusion:
//!
//! * `lakelog_dataset(key)`: the dataset prefix of a key ([`DatasetRule::dataset`]);
//! * `lakelog_key_day(key)`: the date a key names ([`key_date`]) as days since 1970-01-01, or
//!   null.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int32Builder, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use chrono::NaiveDate;
use deltalake::datafusion::common::{DataFusionError, ScalarValue};
use deltalake::datafusion::logical_expr::{ColumnarValue, Volatility, create_udf};
use deltalake::datafusion::prelude::SessionContext;

use super::dataset::{DatasetRule, key_date};

/// Name of the SQL function giving a key's dataset.
pub(super) const DATASET_FN: &str = "lakelog_dataset";
/// Name of the SQL function giving the day a key names.
pub(super) const KEY_DAY_FN: &str = "lakelog_key_day";

/// Registers both functions in `ctx` (replacing earlier ones), `lakelog_dataset` with `rule`.
pub(super) fn register(ctx: &SessionContext, rule: &DatasetRule) {
    let rule = rule.clone();
    ctx.register_udf(create_udf(
        DATASET_FN,
        vec![DataType::Utf8],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(move |args: &[ColumnarValue]| {
            map_keys(DATASET_FN, args, |keys| {
                let mut out = StringBuilder::with_capacity(keys.len(), keys.len() * 16);
                for key in keys.iter() {
                    out.append_option(key.map(|k| rule.dataset(k)));
                }
                Arc::new(out.finish())
            })
        }),
    ));
    ctx.register_udf(create_udf(
        KEY_DAY_FN,
        vec![DataType::Utf8],
        DataType::Int32,
        Volatility::Immutable,
        Arc::new(|args: &[ColumnarValue]| {
            map_keys(KEY_DAY_FN, args, |keys| {
                let mut out = Int32Builder::with_capacity(keys.len());
                for key in keys.iter() {
                    out.append_option(key.and_then(key_date).map(epoch_day));
                }
                Arc::new(out.finish())
            })
        }),
    ));
}

/// Days since 1970-01-01 of `date` (the value of a Delta `date`).
pub(super) fn epoch_day(date: NaiveDate) -> i32 {
    (date - NaiveDate::default()).num_days() as i32
}

/// Applies `f` to the one string argument of function `name`, as an array or a scalar.
fn map_keys(
    name: &str,
    args: &[ColumnarValue],
    f: impl Fn(&arrow::array::StringArray) -> ArrayRef,
) -> Result<ColumnarValue, DataFusionError> {
    let [arg] = args else {
        return Err(DataFusionError::Plan(format!(
            "{name} takes one argument, got {}",
            args.len()
        )));
    };
    let (array, scalar) = match arg {
        ColumnarValue::Array(array) => (Arc::clone(array), false),
        ColumnarValue::Scalar(value) => (value.to_array()?, true),
    };
    let strings = cast(&array, &DataType::Utf8)?;
    let result = f(strings.as_string::<i32>());
    if scalar {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&result, 0)?))
    } else {
        Ok(ColumnarValue::Array(result))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::ReportSession;

    #[tokio::test]
    async fn the_functions_run_in_sql() {
        let session = ReportSession::new();
        register(session.context(), &DatasetRule::default());
        let rows = session
            .query(
                "udf",
                "SELECT k, lakelog_dataset(k) AS dataset, lakelog_key_day(k) AS day FROM (VALUES \
                 ('events/clicks/dt=2024-06-01/part-0.parquet'), ('models/v3/w.bin'), (NULL)) AS t(k) \
                 ORDER BY k NULLS LAST",
            )
            .await
            .unwrap();
        assert_eq!(
            rows.strings("dataset").unwrap(),
            [Some("events/clicks/".to_owned()), Some("models/v3/".to_owned()), None]
        );
        assert_eq!(rows.i64s("day").unwrap(), [Some(19_875), None, None]);
        let scalar = session
            .query(
                "scalar",
                "SELECT lakelog_dataset('a/b/c/d') AS d, lakelog_key_day('x/2024-06-01/y') AS day",
            )
            .await
            .unwrap();
        assert_eq!(scalar.strings("d").unwrap(), [Some("a/b/".to_owned())]);
        assert_eq!(scalar.dates("day").unwrap(), [NaiveDate::from_ymd_opt(2024, 6, 1)]);
        assert_eq!(epoch_day(NaiveDate::from_ymd_opt(1970, 1, 2).unwrap()), 1);
    }
}
