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

use crate::session::quote_literal;

/// Object reads.
pub(super) const READS: &[&str] = &[
    "REST.GET.OBJECT",
    "REST.HEAD.OBJECT",
    "REST.COPY.OBJECT_GET",
    "REST.COPY.PART_GET",
    "REST.GET.OBJECT_TORRENT",
    "WEBSITE.GET.OBJECT",
    "WEBSITE.HEAD.OBJECT",
];

/// Object writes.
pub(super) const WRITES: &[&str] = &[
    "REST.PUT.OBJECT",
    "REST.POST.OBJECT",
    "REST.COPY.OBJECT",
    "REST.POST.UPLOAD",
];

/// Object deletes by a requester.
pub(super) const DELETES: &[&str] = &["REST.DELETE.OBJECT", "BATCH.DELETE.OBJECT"];

/// The prefix of operations S3 performs itself (lifecycle).
pub(super) const LIFECYCLE_PREFIX: &str = "S3.";

/// Lifecycle operations after which an object is gone.
pub(super) const LIFECYCLE_REMOVALS: &[&str] = &["S3.EXPIRE.OBJECT", "S3.CREATE.DELETEMARKER"];

/// What an operation does to the data: the rules [`class_sql`] gives SQL, in Rust, to test it by.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum OpClass {
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

#[cfg(test)]
impl OpClass {
    /// The class's name in SQL results.
    pub(super) fn as_str(self) -> &'static str {
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
#[cfg(test)]
pub(super) fn classify(operation: &str) -> OpClass {
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

/// A SQL `CASE` expression giving the class name (`read`, `write`, `delete`, `lifecycle` or
/// `other`) of the operation in `column`.
pub(super) fn class_sql(column: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::ReportSession;

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
    }

    #[test]
    fn the_sql_names_every_list() {
        let sql = class_sql("operation");
        for op in READS.iter().chain(WRITES).chain(DELETES) {
            assert!(sql.contains(&format!("'{op}'")), "{op}");
        }
        assert!(sql.starts_with("CASE WHEN operation IN ('REST.GET.OBJECT'"));
    }

    #[tokio::test]
    async fn the_sql_classes_are_the_rust_classes() {
        let session = ReportSession::new();
        let ops = [
            "REST.GET.OBJECT",
            "REST.HEAD.OBJECT",
            "REST.COPY.OBJECT_GET",
            "REST.PUT.OBJECT",
            "REST.POST.UPLOAD",
            "REST.PUT.PART",
            "REST.DELETE.OBJECT",
            "BATCH.DELETE.OBJECT",
            "S3.EXPIRE.OBJECT",
            "S3.TRANSITION_GIR.OBJECT",
            "REST.GET.BUCKET",
            "S3",
        ];
        let values = ops
            .iter()
            .map(|op| format!("({})", quote_literal(op)))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = session
            .query(
                "classes",
                &format!(
                    "SELECT op, {} AS class FROM (VALUES {values}) AS t(op)",
                    class_sql("op")
                ),
            )
            .await
            .unwrap();
        let got: Vec<(String, String)> = rows
            .strings("op")
            .unwrap()
            .into_iter()
            .zip(rows.strings("class").unwrap())
            .map(|(o, c)| (o.unwrap(), c.unwrap()))
            .collect();
        assert_eq!(got.len(), ops.len());
        for (op, class) in got {
            assert_eq!(class, classify(&op).as_str(), "{op}");
        }
    }
}
