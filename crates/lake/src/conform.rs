//! Rows of files written before a schema change, read into the table's current schema.
//!
//! A table's schema grows: a nullable column added (`ALTER TABLE ... ADD COLUMNS`, or a newer
//! release of a writer), a nullable field added at the end of a struct column (a new typed event
//! parameter in `eventParams`). Files written before keep their own schema, and every rewrite
//! (compaction, the writers' packing, deduplication) reads them in it; [`conform`] brings their
//! rows to the current schema, with the missing columns and struct fields null, as Delta readers
//! read them.

use arrow::datatypes::{Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use deltalake::DeltaTableError;

/// `batch` in `target`'s columns, in its order: columns and struct fields (at any depth) that
/// `batch` lacks are null, provided they are nullable, and columns `target` does not have are
/// dropped. A batch already of `target`'s columns is returned as it is.
pub(crate) fn conform(batch: RecordBatch, target: &SchemaRef) -> Result<RecordBatch, DeltaTableError> {
    if batch.schema().fields() == target.fields() {
        return Ok(batch);
    }
    deltalake::kernel::cast_record_batch(&batch, SchemaRef::clone(target), false, true)
}

/// Whether `target` has every field of `fields` (struct fields at any depth, by name): then
/// [`conform`] only adds what `fields` lack and drops nothing.
pub(crate) fn covers(target: &arrow::datatypes::Fields, fields: &arrow::datatypes::Fields) -> bool {
    use arrow::datatypes::DataType;
    fields.iter().all(|field| {
        target
            .iter()
            .find(|t| t.name() == field.name())
            .is_some_and(|t| match (t.data_type(), field.data_type()) {
                (DataType::Struct(t), DataType::Struct(f)) => covers(t, f),
                _ => true,
            })
    })
}

/// `schema` without the columns `partition_columns` names: the schema of a table's data files,
/// which hold no partition column.
pub(crate) fn without_partitions<'a>(
    schema: &Schema,
    partition_columns: impl IntoIterator<Item = &'a String> + Clone,
) -> SchemaRef {
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .filter(|f| !partition_columns.clone().into_iter().any(|p| p == f.name()))
        .cloned()
        .collect();
    std::sync::Arc::new(Schema::new(fields))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, ArrayRef, AsArray, Int32Array, StringArray, StructArray};
    use arrow::datatypes::{DataType, Field, Fields};

    use super::*;

    fn params(fields: Vec<Field>) -> DataType {
        DataType::Struct(Fields::from(fields))
    }

    #[test]
    fn missing_columns_and_struct_fields_read_as_null() {
        let old_params = vec![Field::new("device_id", DataType::Utf8, true)];
        let old = Arc::new(Schema::new(vec![
            Field::new("eventId", DataType::Utf8, false),
            Field::new("eventParams", params(old_params.clone()), true),
        ]));
        let device: ArrayRef = Arc::new(StringArray::from(vec![Some("d1"), None]));
        let batch = RecordBatch::try_new(
            Arc::clone(&old),
            vec![
                Arc::new(StringArray::from(vec!["a", "b"])),
                Arc::new(StructArray::new(
                    Fields::from(old_params),
                    vec![device],
                    Some(vec![true, false].into()),
                )),
            ],
        )
        .unwrap();
        let new_params = vec![
            Field::new("device_id", DataType::Utf8, true),
            Field::new("level", DataType::Int32, true),
        ];
        let target = Arc::new(Schema::new(vec![
            Field::new("eventId", DataType::Utf8, false),
            Field::new("gameId", DataType::Utf8, true),
            Field::new("eventParams", params(new_params), true),
        ]));
        let read = conform(batch, &target).unwrap();
        assert_eq!(read.schema(), target);
        assert_eq!(read.column(1).null_count(), 2);
        let params = read.column(2).as_struct();
        assert_eq!(params.column(0).as_string::<i32>().value(0), "d1");
        assert!(params.is_null(1), "a null struct stays null");
        let level = params.column(1).as_any().downcast_ref::<Int32Array>().unwrap();
        assert_eq!(level.null_count(), 2);

        // A missing column that may not be null cannot be made up.
        let strict = Arc::new(Schema::new(vec![Field::new("required", DataType::Utf8, false)]));
        assert!(conform(read, &strict).is_err());
    }

    #[test]
    fn data_files_hold_no_partition_column() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("day", DataType::Date32, false),
        ]);
        let files = without_partitions(&schema, &["day".to_owned()]);
        assert_eq!(files.fields().len(), 1);
        assert_eq!(files.field(0).name(), "a");
    }
}
