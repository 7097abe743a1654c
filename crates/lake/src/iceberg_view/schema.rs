//! A Delta table's schema as an Iceberg schema, field by field, nested fields included, with ids
//! that stay the same for as long as a column does; and the name mapping through which Iceberg
//! readers find those ids in data files that carry none.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, TimeUnit};
use iceberg::spec::{
    ListType, MapType, MappedField, NameMapping, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Type,
};

/// Why a schema has no Iceberg form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {reason}")]
pub(crate) struct SchemaError {
    /// The column (dotted path for nested fields).
    pub(crate) column: String,
    /// What is wrong with it.
    pub(crate) reason: String,
}

/// The Iceberg form of `arrow`: each field keeps the id it has in `previous` (matched by its
/// path of names), and new fields take ids above `last_column_id`.
///
/// The `partition_columns` are optional in the Iceberg form whatever Delta says: Delta keeps
/// their values out of the data files, readers take them from the manifests, and PyIceberg does
/// so only for optional fields (it refuses a required field missing from a file).
pub(crate) fn iceberg_schema(
    arrow: &ArrowSchema,
    partition_columns: &[String],
    previous: Option<&Schema>,
    last_column_id: i32,
) -> Result<Schema, SchemaError> {
    let mut ids = Ids { next: last_column_id };
    let old = previous.map(|s| s.as_struct().fields());
    let fields = arrow
        .fields()
        .iter()
        .map(|field| {
            let field = ids.field(field, field.name(), old)?;
            if partition_columns.contains(&field.name) && field.required {
                let mut optional = field.as_ref().clone();
                optional.required = false;
                return Ok(Arc::new(optional));
            }
            Ok(field)
        })
        .collect::<Result<Vec<_>, SchemaError>>()?;
    Schema::builder().with_fields(fields).build().map_err(|e| SchemaError {
        column: String::new(),
        reason: e.to_string(),
    })
}

/// Hands out field ids: a field's old id when it had one, else the next new one.
struct Ids {
    next: i32,
}

impl Ids {
    fn id(&mut self, old: Option<&NestedFieldRef>) -> i32 {
        match old {
            Some(field) => field.id,
            None => {
                self.next += 1;
                self.next
            }
        }
    }

    fn field(
        &mut self,
        field: &Field,
        path: &str,
        old: Option<&[NestedFieldRef]>,
    ) -> Result<NestedFieldRef, SchemaError> {
        let before = old.and_then(|fields| fields.iter().find(|f| f.name == *field.name()));
        let id = self.id(before);
        let field_type = self.field_type(field.data_type(), path, before.map(|f| f.field_type.as_ref()))?;
        Ok(Arc::new(NestedField::new(
            id,
            field.name(),
            field_type,
            !field.is_nullable(),
        )))
    }

    fn field_type(&mut self, data_type: &DataType, path: &str, old: Option<&Type>) -> Result<Type, SchemaError> {
        let unsupported = || SchemaError {
            column: path.to_owned(),
            reason: format!("type {data_type} has no Iceberg equivalent"),
        };
        let primitive = match data_type {
            DataType::Boolean => PrimitiveType::Boolean,
            DataType::Int8 | DataType::Int16 | DataType::Int32 => PrimitiveType::Int,
            DataType::Int64 => PrimitiveType::Long,
            DataType::Float32 => PrimitiveType::Float,
            DataType::Float64 => PrimitiveType::Double,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => PrimitiveType::String,
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => PrimitiveType::Binary,
            DataType::Date32 => PrimitiveType::Date,
            DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => PrimitiveType::Timestamptz,
            DataType::Timestamp(TimeUnit::Microsecond, None) => PrimitiveType::Timestamp,
            DataType::Decimal128(precision, scale) => PrimitiveType::Decimal {
                precision: u32::from(*precision),
                scale: u32::try_from(*scale).map_err(|_| unsupported())?,
            },
            DataType::Struct(fields) => {
                let old = match old {
                    Some(Type::Struct(s)) => Some(s.fields()),
                    _ => None,
                };
                let fields = fields
                    .iter()
                    .map(|f| self.field(f, &format!("{path}.{}", f.name()), old))
                    .collect::<Result<Vec<_>, _>>()?;
                return Ok(Type::Struct(StructType::new(fields)));
            }
            DataType::List(element) | DataType::LargeList(element) => {
                let old = match old {
                    Some(Type::List(l)) => Some(&l.element_field),
                    _ => None,
                };
                let id = self.id(old);
                let element_type = self.field_type(
                    element.data_type(),
                    &format!("{path}.element"),
                    old.map(|f| f.field_type.as_ref()),
                )?;
                let element = NestedField::list_element(id, element_type, !element.is_nullable());
                return Ok(Type::List(ListType::new(Arc::new(element))));
            }
            DataType::Map(entries, _) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err(unsupported());
                };
                let [key, value] = kv.iter().collect::<Vec<_>>()[..] else {
                    return Err(unsupported());
                };
                let (old_key, old_value) = match old {
                    Some(Type::Map(m)) => (Some(&m.key_field), Some(&m.value_field)),
                    _ => (None, None),
                };
                let key_id = self.id(old_key);
                let key_type = self.field_type(
                    key.data_type(),
                    &format!("{path}.key"),
                    old_key.map(|f| f.field_type.as_ref()),
                )?;
                let value_id = self.id(old_value);
                let value_type = self.field_type(
                    value.data_type(),
                    &format!("{path}.value"),
                    old_value.map(|f| f.field_type.as_ref()),
                )?;
                let key = NestedField::map_key_element(key_id, key_type);
                let value = NestedField::map_value_element(value_id, value_type, !value.is_nullable());
                return Ok(Type::Map(MapType::new(Arc::new(key), Arc::new(value))));
            }
            _ => return Err(unsupported()),
        };
        Ok(Type::Primitive(primitive))
    }
}

/// The name mapping of `schema`: each field's id by its name, nested fields included, so that
/// readers resolve the columns of data files written without Iceberg field ids.
pub(crate) fn name_mapping(schema: &Schema) -> NameMapping {
    NameMapping::new(schema.as_struct().fields().iter().map(|f| mapped(f)).collect())
}

fn mapped(field: &NestedField) -> MappedField {
    MappedField::new(Some(field.id), vec![field.name.clone()], children(&field.field_type))
}

fn children(field_type: &Type) -> Vec<MappedField> {
    match field_type {
        Type::Struct(s) => s.fields().iter().map(|f| mapped(f)).collect(),
        Type::List(l) => vec![mapped(&l.element_field)],
        Type::Map(m) => vec![mapped(&m.key_field), mapped(&m.value_field)],
        Type::Primitive(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrow(fields: Vec<Field>) -> ArrowSchema {
        ArrowSchema::new(fields)
    }

    fn utc() -> DataType {
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
    }

    #[test]
    fn every_column_maps_nested_fields_included() {
        let params = DataType::Struct(
            vec![
                Field::new("level", DataType::Int64, true),
                Field::new("sku", DataType::Utf8, true),
            ]
            .into(),
        );
        let schema = iceberg_schema(
            &arrow(vec![
                Field::new("eventId", DataType::Utf8, false),
                Field::new("eventTime", utc(), false),
                Field::new("eventDate", DataType::Date32, false),
                Field::new("eventParams", params, true),
                Field::new("data", DataType::Binary, false),
                Field::new("http_status", DataType::Int32, true),
                Field::new(
                    "tags",
                    DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                    true,
                ),
            ]),
            &["eventDate".to_owned()],
            None,
            0,
        )
        .unwrap();
        assert_eq!(schema.field_id_by_name("eventId"), Some(1));
        assert!(
            !schema.field_by_name("eventDate").unwrap().required,
            "partition values come from manifests"
        );
        assert_eq!(schema.field_id_by_name("eventParams.level"), Some(5));
        assert_eq!(schema.field_id_by_name("eventParams.sku"), Some(6));
        assert_eq!(
            *schema.field_by_name("eventTime").unwrap().field_type,
            Type::Primitive(PrimitiveType::Timestamptz)
        );
        assert!(schema.field_by_name("eventId").unwrap().required);
        assert!(!schema.field_by_name("http_status").unwrap().required);
        assert_eq!(schema.highest_field_id(), 10);
        let mapping = serde_json::to_value(name_mapping(&schema)).unwrap();
        assert_eq!(mapping[3]["names"][0], "eventParams");
        assert_eq!(mapping[3]["fields"][1]["field-id"], 6);
    }

    #[test]
    fn an_added_column_takes_a_new_id_and_the_others_keep_theirs() {
        let before = iceberg_schema(
            &arrow(vec![
                Field::new("a", DataType::Utf8, false),
                Field::new(
                    "s",
                    DataType::Struct(vec![Field::new("x", DataType::Int64, true)].into()),
                    true,
                ),
            ]),
            &[],
            None,
            0,
        )
        .unwrap();
        let after = iceberg_schema(
            &arrow(vec![
                Field::new("a", DataType::Utf8, false),
                Field::new(
                    "s",
                    DataType::Struct(
                        vec![
                            Field::new("x", DataType::Int64, true),
                            Field::new("y", DataType::Utf8, true),
                        ]
                        .into(),
                    ),
                    true,
                ),
                Field::new("b", DataType::Float64, true),
            ]),
            &[],
            Some(&before),
            before.highest_field_id(),
        )
        .unwrap();
        assert_eq!(after.field_id_by_name("a"), Some(1));
        assert_eq!(after.field_id_by_name("s.x"), Some(3));
        assert_eq!(after.field_id_by_name("s.y"), Some(4));
        assert_eq!(after.field_id_by_name("b"), Some(5));
    }

    #[test]
    fn a_type_without_an_iceberg_form_names_its_column() {
        let err = iceberg_schema(
            &arrow(vec![Field::new(
                "s",
                DataType::Struct(vec![Field::new("u", DataType::UInt64, true)].into()),
                true,
            )]),
            &[],
            None,
            0,
        )
        .unwrap_err();
        assert_eq!(err.column, "s.u");
        assert!(err.reason.contains("UInt64"), "{err}");
    }
}
