//! The named fields of an access-log line, in the order S3 writes them.

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
