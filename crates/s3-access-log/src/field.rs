//! The named fields of an access-log line, in the order S3 writes them, and those of its JSON form.

use std::fmt;

/// One named field of an access-log line; its discriminant is its 0-based position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Field {
    /// Field 1: canonical user id of the bucket owner.
    BucketOwner,
    /// Field 2: the bucket the request was made to.
    Bucket,
    /// Field 3: `[dd/Mon/yyyy:HH:MM:SS ±hhmm]`.
    RequestTime,
    /// Field 4: the requester's IP address.
    RemoteIp,
    /// Field 5: canonical user id or ARN of the requester.
    Requester,
    /// Field 6: S3's request id.
    RequestId,
    /// Field 7: for example `REST.GET.OBJECT`.
    Operation,
    /// Field 8: the object key, URL-encoded.
    Key,
    /// Field 9: the HTTP request line, quoted.
    RequestUri,
    /// Field 10: the HTTP status.
    HttpStatus,
    /// Field 11: S3's error code.
    ErrorCode,
    /// Field 12: response bytes sent, without headers.
    BytesSent,
    /// Field 13: the size of the object.
    ObjectSize,
    /// Field 14: milliseconds the request was in flight.
    TotalTime,
    /// Field 15: milliseconds S3 spent processing.
    TurnAroundTime,
    /// Field 16: the HTTP Referer header, quoted.
    Referer,
    /// Field 17: the HTTP User-Agent header, quoted.
    UserAgent,
    /// Field 18: the version id of the object.
    VersionId,
    /// Field 19: `x-amz-id-2`.
    HostId,
    /// Field 20: `SigV2`, `SigV4` or `-`.
    SignatureVersion,
    /// Field 21: the TLS cipher suite.
    CipherSuite,
    /// Field 22: `AuthHeader`, `QueryString` or `-`.
    AuthenticationType,
    /// Field 23: the endpoint that was called.
    HostHeader,
    /// Field 24: the TLS version.
    TlsVersion,
    /// Field 25: the access point ARN.
    AccessPointArn,
    /// Field 26: `Yes` when an ACL was required to authorise the request.
    AclRequired,
    /// Field 27: the AWS Region the request came from.
    SourceRegion,
}

impl Field {
    /// Every named field, in line order.
    pub const ALL: [Field; 27] = [
        Field::BucketOwner,
        Field::Bucket,
        Field::RequestTime,
        Field::RemoteIp,
        Field::Requester,
        Field::RequestId,
        Field::Operation,
        Field::Key,
        Field::RequestUri,
        Field::HttpStatus,
        Field::ErrorCode,
        Field::BytesSent,
        Field::ObjectSize,
        Field::TotalTime,
        Field::TurnAroundTime,
        Field::Referer,
        Field::UserAgent,
        Field::VersionId,
        Field::HostId,
        Field::SignatureVersion,
        Field::CipherSuite,
        Field::AuthenticationType,
        Field::HostHeader,
        Field::TlsVersion,
        Field::AccessPointArn,
        Field::AclRequired,
        Field::SourceRegion,
    ];

    /// The column this field lands in.
    pub const fn column(self) -> &'static str {
        match self {
            Field::BucketOwner => "bucket_owner",
            Field::Bucket => "bucket",
            Field::RequestTime => "request_time",
            Field::RemoteIp => "remote_ip",
            Field::Requester => "requester",
            Field::RequestId => "request_id",
            Field::Operation => "operation",
            Field::Key => "key",
            Field::RequestUri => "request_uri",
            Field::HttpStatus => "http_status",
            Field::ErrorCode => "error_code",
            Field::BytesSent => "bytes_sent",
            Field::ObjectSize => "object_size",
            Field::TotalTime => "total_time_ms",
            Field::TurnAroundTime => "turn_around_time_ms",
            Field::Referer => "referer",
            Field::UserAgent => "user_agent",
            Field::VersionId => "version_id",
            Field::HostId => "host_id",
            Field::SignatureVersion => "signature_version",
            Field::CipherSuite => "cipher_suite",
            Field::AuthenticationType => "authentication_type",
            Field::HostHeader => "host_header",
            Field::TlsVersion => "tls_version",
            Field::AccessPointArn => "access_point_arn",
            Field::AclRequired => "acl_required",
            Field::SourceRegion => "source_region",
        }
    }

    /// The 1-based position of the field in the line.
    pub const fn number(self) -> usize {
        self as usize + 1
    }

    /// What must follow the closing quote of a quoted field.
    pub(crate) const fn closing_context(self) -> &'static str {
        match self {
            Field::RequestUri => "quote followed by an HTTP status, error code, four numbers and the referer",
            Field::Referer => "quote followed by the user agent",
            _ => "quote",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.column())
    }
}

/// A documented field of the JSON form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonField {
    /// `schema_version_id`: the version of the record's schema.
    SchemaVersionId,
    /// `bucket_arn`: the ARN of the bucket.
    BucketArn,
    /// A field with a text-format counterpart.
    Text(Field),
}

impl JsonField {
    /// Every documented field, in the guide's order.
    pub const ALL: [JsonField; 29] = [
        JsonField::SchemaVersionId,
        JsonField::BucketArn,
        JsonField::Text(Field::Bucket),
        JsonField::Text(Field::RequestTime),
        JsonField::Text(Field::BucketOwner),
        JsonField::Text(Field::RemoteIp),
        JsonField::Text(Field::Requester),
        JsonField::Text(Field::RequestId),
        JsonField::Text(Field::Operation),
        JsonField::Text(Field::Key),
        JsonField::Text(Field::RequestUri),
        JsonField::Text(Field::HttpStatus),
        JsonField::Text(Field::ErrorCode),
        JsonField::Text(Field::BytesSent),
        JsonField::Text(Field::ObjectSize),
        JsonField::Text(Field::TotalTime),
        JsonField::Text(Field::TurnAroundTime),
        JsonField::Text(Field::Referer),
        JsonField::Text(Field::UserAgent),
        JsonField::Text(Field::VersionId),
        JsonField::Text(Field::HostId),
        JsonField::Text(Field::SignatureVersion),
        JsonField::Text(Field::CipherSuite),
        JsonField::Text(Field::AuthenticationType),
        JsonField::Text(Field::HostHeader),
        JsonField::Text(Field::TlsVersion),
        JsonField::Text(Field::AccessPointArn),
        JsonField::Text(Field::AclRequired),
        JsonField::Text(Field::SourceRegion),
    ];

    /// The field's name in a record.
    pub const fn name(self) -> &'static str {
        match self {
            JsonField::SchemaVersionId => "schema_version_id",
            JsonField::BucketArn => "bucket_arn",
            JsonField::Text(field) => match field {
                Field::BucketOwner => "bucket_owner_id",
                Field::Bucket => "bucket_name",
                Field::Key => "key_name",
                Field::BytesSent => "bytes_sent_size",
                Field::TotalTime => "total_duration",
                Field::TurnAroundTime => "turn_around_duration",
                other => other.column(),
            },
        }
    }

    /// The text-format field whose column this field lands in, if it has one.
    pub const fn field(self) -> Option<Field> {
        match self {
            JsonField::Text(field) => Some(field),
            JsonField::SchemaVersionId | JsonField::BucketArn => None,
        }
    }

    pub(crate) fn of_name(name: &str) -> Option<Self> {
        let field = match name {
            "schema_version_id" => return Some(JsonField::SchemaVersionId),
            "bucket_arn" => return Some(JsonField::BucketArn),
            "bucket_name" => Field::Bucket,
            "request_time" => Field::RequestTime,
            "bucket_owner_id" => Field::BucketOwner,
            "remote_ip" => Field::RemoteIp,
            "requester" => Field::Requester,
            "request_id" => Field::RequestId,
            "operation" => Field::Operation,
            "key_name" => Field::Key,
            "request_uri" => Field::RequestUri,
            "http_status" => Field::HttpStatus,
            "error_code" => Field::ErrorCode,
            "bytes_sent_size" => Field::BytesSent,
            "object_size" => Field::ObjectSize,
            "total_duration" => Field::TotalTime,
            "turn_around_duration" => Field::TurnAroundTime,
            "referer" => Field::Referer,
            "user_agent" => Field::UserAgent,
            "version_id" => Field::VersionId,
            "host_id" => Field::HostId,
            "signature_version" => Field::SignatureVersion,
            "cipher_suite" => Field::CipherSuite,
            "authentication_type" => Field::AuthenticationType,
            "host_header" => Field::HostHeader,
            "tls_version" => Field::TlsVersion,
            "access_point_arn" => Field::AccessPointArn,
            "acl_required" => Field::AclRequired,
            "source_region" => Field::SourceRegion,
            _ => return None,
        };
        Some(JsonField::Text(field))
    }
}

impl fmt::Display for JsonField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
