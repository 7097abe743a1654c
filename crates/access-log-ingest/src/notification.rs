//! S3 event notifications as SQS message bodies, parsed leniently.
//!
//! Real S3 sends `{"Records": [{"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name"}, "object":
//! {"key"}}}]}`; through SNS the same document arrives as the string `Message` of an SNS envelope;
//! when a notification is configured S3 first sends `{"Event": "s3:TestEvent"}`. Local stand-ins
//! omit fields such as `userIdentity`, so only the fields used here are required. Keys arrive
//! URL-encoded form-style (`+` is a space) and are decoded.

use serde_json::Value;

use crate::objects::ObjectRef;

/// What a message body asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    /// Objects were created (other event types are left out).
    Objects(Vec<ObjectRef>),
    /// The test event S3 sends when a notification is configured.
    Test,
}

/// Why a message body is not a notification this function can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotificationError {
    /// The body is not JSON.
    #[error("message body is not JSON: {0}")]
    NotJson(String),
    /// The body is JSON but not an S3 notification.
    #[error("message body is not an S3 event notification (no Records, Event or SNS Message)")]
    NotANotification,
    /// A record lacks a field it needs.
    #[error("Records[{index}]: {field} is missing or not a string")]
    MissingField {
        /// The record's index in `Records`.
        index: usize,
        /// The JSON path of the field within the record.
        field: &'static str,
    },
}

/// Parses one SQS message body.
pub fn parse_body(body: &str) -> Result<Notification, NotificationError> {
    let value: Value = serde_json::from_str(body).map_err(|e| NotificationError::NotJson(e.to_string()))?;
    parse_value(&value)
}

fn parse_value(value: &Value) -> Result<Notification, NotificationError> {
    if let Some(records) = value.get("Records").and_then(Value::as_array) {
        let mut objects = Vec::with_capacity(records.len());
        for (index, record) in records.iter().enumerate() {
            let created = record
                .get("eventName")
                .and_then(Value::as_str)
                .is_none_or(|name| name.starts_with("ObjectCreated") || name.starts_with("s3:ObjectCreated"));
            if !created {
                continue;
            }
            let text = |field: &'static str, path: [&str; 3]| {
                record
                    .pointer(&format!("/{}/{}/{}", path[0], path[1], path[2]))
                    .and_then(Value::as_str)
                    .ok_or(NotificationError::MissingField { index, field })
            };
            let bucket = text("s3.bucket.name", ["s3", "bucket", "name"])?;
            let key = text("s3.object.key", ["s3", "object", "key"])?;
            objects.push(ObjectRef::S3 {
                bucket: bucket.to_owned(),
                key: s3_access_log::decode_key(key.as_bytes()).into_owned(),
            });
        }
        return Ok(Notification::Objects(objects));
    }
    if value.get("Event").and_then(Value::as_str) == Some("s3:TestEvent") {
        return Ok(Notification::Test);
    }
    if let Some(message) = value.get("Message").and_then(Value::as_str) {
        return parse_body(message);
    }
    Err(NotificationError::NotANotification)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(bucket: &str, key: &str) -> ObjectRef {
        ObjectRef::S3 {
            bucket: bucket.into(),
            key: key.into(),
        }
    }

    #[test]
    fn real_s3_notification() {
        let body = r#"{"Records":[{"eventVersion":"2.1","eventSource":"aws:s3","awsRegion":"eu-west-1",
            "eventTime":"2024-06-01T00:00:05.000Z","eventName":"ObjectCreated:Put",
            "userIdentity":{"principalId":"AWS:X"},"requestParameters":{"sourceIPAddress":"1.2.3.4"},
            "responseElements":{"x-amz-request-id":"R"},"s3":{"s3SchemaVersion":"1.0","configurationId":"c",
            "bucket":{"name":"raw-logs","ownerIdentity":{"principalId":"P"},"arn":"arn:aws:s3:::raw-logs"},
            "object":{"key":"logs/2024-06-01-00-00-05-ABC","size":1234,"eTag":"e","sequencer":"0A"}}}]}"#;
        assert_eq!(
            parse_body(body).unwrap(),
            Notification::Objects(vec![s3("raw-logs", "logs/2024-06-01-00-00-05-ABC")])
        );
    }

    #[test]
    fn stand_in_notification_without_optional_fields_and_encoded_keys() {
        let body = r#"{"Records":[{"eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"raw"},
            "object":{"key":"logs%2Fa+b%2Bc%C3%A9.log"}}}]}"#;
        assert_eq!(
            parse_body(body).unwrap(),
            Notification::Objects(vec![s3("raw", "logs/a b+cé.log")])
        );
    }

    #[test]
    fn sns_wrapped_test_event_and_other_events() {
        let inner = r#"{"Records":[{"eventName":"ObjectCreated:CompleteMultipartUpload","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}},{"eventName":"ObjectRemoved:Delete","s3":{"bucket":{"name":"b"},"object":{"key":"gone"}}}]}"#;
        let sns = serde_json::json!({"Type": "Notification", "TopicArn": "arn:aws:sns:x", "Message": inner});
        assert_eq!(
            parse_body(&sns.to_string()).unwrap(),
            Notification::Objects(vec![s3("b", "k")])
        );
        let test = r#"{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2024-06-01T00:00:00Z","Bucket":"raw"}"#;
        assert_eq!(parse_body(test).unwrap(), Notification::Test);
    }

    #[test]
    fn bad_bodies_name_what_is_wrong() {
        assert!(matches!(parse_body("not json"), Err(NotificationError::NotJson(_))));
        assert_eq!(parse_body(r#"{"hello":1}"#), Err(NotificationError::NotANotification));
        let no_key = r#"{"Records":[{"s3":{"bucket":{"name":"b"},"object":{}}}]}"#;
        assert_eq!(
            parse_body(no_key).unwrap_err().to_string(),
            "Records[0]: s3.object.key is missing or not a string"
        );
    }
}
