//! What an access-log `operation` does to the data: read it, write it, delete it, or a lifecycle
//! action of S3 itself.
//!
//! Operation names are those of the S3 server access log format (`REST.<METHOD>.<RESOURCE>` for
//! requests, `S3.<ACTION>` for what S3 Lifecycle does, `BATCH.DELETE.OBJECT` for each key of a
//! multi-object delete, `WEBSITE.*` for website endpoints):
//!
//! * reads: `GetObject` (`REST.GET.OBJECT`, `WEBSITE.GET.OBJECT`), `HeadObject`
//!   (`REST.HEAD.OBJECT`, `WEBSITE.HEAD.OBJECT`), the source side of `CopyObject`
//!   (`REST.COPY.OBJECT_GET`) and of `UploadPartCopy` (`REST.COPY.PART_GET`), and BitTorrent
//!   (`REST.GET.OBJECT_TORRENT`);
//! * writes: `PutObject` (`REST.PUT.OBJECT`), browser-form `PostObject` (`REST.POST.OBJECT`), the
//!   destination of `CopyObject` (`REST.COPY.OBJECT`) and `CompleteMultipartUpload`
//!   (`REST.POST.UPLOAD`). The parts of a multipart upload (`REST.PUT.PART`, `REST.COPY.PART`)
//!   are not writes of their own: the completion is the write;
//! * deletes: `REST.DELETE.OBJECT` and `BATCH.DELETE.OBJECT`;
//! * lifecycle: every `S3.*` operation (`S3.EXPIRE.OBJECT`, `S3.CREATE.DELETEMARKER`,
//!   `S3.TRANSITION_SIA.OBJECT`, `S3.TRANSITION_ZIA.OBJECT`, `S3.TRANSITION_INT.OBJECT`,
//!   `S3.TRANSITION_GIR.OBJECT`, `S3.TRANSITION.OBJECT`, `S3.TRANSITION_GDA.OBJECT`,
//!   `S3.DELETE.UPLOAD`);
//! * everything else (listing, ACLs, tags, multipart parts, bucket configuration) is other.

use crate::quote_literal;

/// Object reads.
pub const READS: &[&str] = &[
    "REST.GET.OBJECT",
    "REST.HEAD.OBJECT",
    "REST.COPY.OBJECT_GET",
    "REST.COPY.PART_GET",
    "REST.GET.OBJECT_TORRENT",
    "WEBSITE.GET.OBJECT",
    "WEBSITE.HEAD.OBJECT",
];

/// Object writes.
pub const WRITES: &[&str] = &[
    "REST.PUT.OBJECT",
    "REST.POST.OBJECT",
    "REST.COPY.OBJECT",
    "REST.POST.UPLOAD",
];

/// Object deletes by a requester.
pub const DELETES: &[&str] = &["REST.DELETE.OBJECT", "BATCH.DELETE.OBJECT"];

/// The prefix of operations S3 performs itself (lifecycle).
pub const LIFECYCLE_PREFIX: &str = "S3.";

/// Lifecycle operations after which an object is gone.
pub const LIFECYCLE_REMOVALS: &[&str] = &["S3.EXPIRE.OBJECT", "S3.CREATE.DELETEMARKER"];

/// Lifecycle transitions, and the storage class each moves an object to.
pub const TRANSITIONS: &[(&str, &str)] = &[
    ("S3.TRANSITION_SIA.OBJECT", "STANDARD_IA"),
    ("S3.TRANSITION_ZIA.OBJECT", "ONEZONE_IA"),
    ("S3.TRANSITION_INT.OBJECT", "INTELLIGENT_TIERING"),
    ("S3.TRANSITION_GIR.OBJECT", "GLACIER_IR"),
    ("S3.TRANSITION.OBJECT", "GLACIER"),
    ("S3.TRANSITION_GDA.OBJECT", "DEEP_ARCHIVE"),
];

/// What an operation does to the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpClass {
    /// Reads an object.
    Read,
    /// Writes an object.
    Write,
    /// Deletes an object.
    Delete,
    /// S3 Lifecycle acts on an object.
    Lifecycle,
    /// Anything else.
    Other,
}

impl OpClass {
    /// The class's name in SQL results.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Delete => "delete",
            Self::Lifecycle => "lifecycle",
            Self::Other => "other",
        }
    }
}

/// The class of `operation`.
pub fn classify(operation: &str) -> OpClass {
    if READS.contains(&operation) {
        OpClass::Read
    } else if WRITES.contains(&operation) {
        OpClass::Write
    } else if DELETES.contains(&operation) {
        OpClass::Delete
    } else if operation.starts_with(LIFECYCLE_PREFIX) {
        OpClass::Lifecycle
    } else {
        OpClass::Other
    }
}

/// A SQL `CASE` expression giving the class name ([`OpClass::as_str`]) of the operation in
/// `column`, by exactly the rules of [`classify`].
pub fn class_sql(column: &str) -> String {
    let list = |ops: &[&str]| ops.iter().map(|o| quote_literal(o)).collect::<Vec<_>>().join(", ");
    format!(
        "CASE WHEN {column} IN ({}) THEN 'read' WHEN {column} IN ({}) THEN 'write' \
         WHEN {column} IN ({}) THEN 'delete' WHEN starts_with({column}, {}) THEN 'lifecycle' ELSE 'other' END",
        list(READS),
        list(WRITES),
        list(DELETES),
        quote_literal(LIFECYCLE_PREFIX),
    )
}

/// The storage class a lifecycle transition moves an object to.
pub fn transition_class(operation: &str) -> Option<&'static str> {
    TRANSITIONS
        .iter()
        .find_map(|(op, class)| (*op == operation).then_some(*class))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_real_operations() {
        for (op, class) in [
            ("REST.GET.OBJECT", OpClass::Read),
            ("REST.HEAD.OBJECT", OpClass::Read),
            ("REST.COPY.OBJECT_GET", OpClass::Read),
            ("REST.COPY.PART_GET", OpClass::Read),
            ("WEBSITE.GET.OBJECT", OpClass::Read),
            ("REST.PUT.OBJECT", OpClass::Write),
            ("REST.POST.OBJECT", OpClass::Write),
            ("REST.COPY.OBJECT", OpClass::Write),
            ("REST.POST.UPLOAD", OpClass::Write),
            ("REST.PUT.PART", OpClass::Other),
            ("REST.POST.UPLOADS", OpClass::Other),
            ("REST.COPY.PART", OpClass::Other),
            ("REST.DELETE.OBJECT", OpClass::Delete),
            ("BATCH.DELETE.OBJECT", OpClass::Delete),
            ("S3.EXPIRE.OBJECT", OpClass::Lifecycle),
            ("S3.TRANSITION_SIA.OBJECT", OpClass::Lifecycle),
            ("S3.TRANSITION.OBJECT", OpClass::Lifecycle),
            ("S3.DELETE.UPLOAD", OpClass::Lifecycle),
            ("REST.GET.BUCKET", OpClass::Other),
            ("REST.GET.ACL", OpClass::Other),
            ("REST.PUT.OBJECT_TAGGING", OpClass::Other),
            ("rest.get.object", OpClass::Other),
        ] {
            assert_eq!(classify(op), class, "{op}");
        }
        assert_eq!(transition_class("S3.TRANSITION_GIR.OBJECT"), Some("GLACIER_IR"));
        assert_eq!(transition_class("S3.EXPIRE.OBJECT"), None);
    }

    #[test]
    fn the_sql_names_every_list() {
        let sql = class_sql("operation");
        for op in READS.iter().chain(WRITES).chain(DELETES) {
            assert!(sql.contains(&format!("'{op}'")), "{op}");
        }
        assert!(sql.starts_with("CASE WHEN operation IN ('REST.GET.OBJECT'"));
    }
}
