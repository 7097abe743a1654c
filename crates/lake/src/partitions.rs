//! The date partitions of a table: which column they are by, and how a file's partition reads.

use std::collections::HashMap;

/// The table's date partition column (`request_date`, `eventDate`): the first partition column of
/// type `DATE`, by which compaction closes partitions and retention drops them.
pub(crate) fn date_partition_column(
    partition_columns: &[String],
    schema: &deltalake::kernel::StructType,
) -> Option<String> {
    partition_columns
        .iter()
        .find(|c| {
            schema
                .field(c.as_str())
                .is_some_and(|f| f.data_type() == &deltalake::kernel::DataType::DATE)
        })
        .cloned()
}

/// The date of a date partition's value (`2024-06-01`), as the log writes it.
pub(crate) fn partition_date(value: &str) -> Option<chrono::NaiveDate> {
    chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d").ok()
}

/// The partition values of a file as `col=value/col=value` (`(unpartitioned)` for none), in the
/// table's partition column order.
pub(crate) fn partition_label(columns: &[String], values: &HashMap<String, Option<String>>) -> String {
    if columns.is_empty() {
        return "(unpartitioned)".to_owned();
    }
    columns
        .iter()
        .map(|c| match values.get(c).and_then(|v| v.as_deref()) {
            Some(v) => format!("{c}={v}"),
            None => format!("{c}=null"),
        })
        .collect::<Vec<_>>()
        .join("/")
}
