//! AWS Signature Version 4, the two forms the EKS token needs: a presigned query (the
//! token is a presigned `GetCallerIdentity` URL) and a signed `Authorization` header (STS
//! `AssumeRole`). Pure: the time comes in as an argument.
//!
//! Written here rather than taken from the `aws-sigv4` crate: that crate brings 27 crates
//! new to the tree (the smithy runtime types, `hmac`, `sha2`, `time`, …) for the ~100 lines
//! below, whose HMAC-SHA256 and SHA-256 come from `ring`, already the TLS provider.
//! Checked against AWS's published vectors (the `get-vanilla-query-order-key-case` case of
//! the SigV4 test suite and the presigned-URL example of the S3 documentation) in the tests.

use ring::{digest, hmac};

/// The algorithm name, in `X-Amz-Algorithm` and the string to sign.
pub(crate) const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// Credentials that sign: the access key id, the secret key and, for temporary
/// credentials, the session token. `Debug` shows only the access key id.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKeys {
    /// The access key id (not a secret: it appears in every signed request).
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: String,
    /// The session token of temporary credentials.
    pub session_token: Option<String>,
}

impl std::fmt::Debug for SigningKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKeys")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Where and when a request is signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope<'a> {
    /// `20150830T123600Z`.
    pub amz_date: &'a str,
    /// The region (`us-east-1`).
    pub region: &'a str,
    /// The service (`sts`).
    pub service: &'a str,
}

impl Scope<'_> {
    /// `20150830/us-east-1/sts/aws4_request`.
    pub(crate) fn credential_scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            &self.amz_date[..self.amz_date.len().min(8)],
            self.region,
            self.service
        )
    }
}

/// `text` percent-encoded as SigV4 wants it: everything but `A-Z a-z 0-9 - _ . ~`, in
/// upper-case hex.
pub(crate) fn uri_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex SHA-256 of `data`.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

/// The canonical query string: pairs encoded, sorted by name then value, `&`-joined.
pub(crate) fn canonical_query(params: &[(String, String)]) -> String {
    let mut encoded: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (uri_encode(k), uri_encode(v)))
        .collect();
    encoded.sort();
    encoded
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// One request as SigV4 sees it.
#[derive(Debug, Clone)]
pub(crate) struct CanonicalRequest<'a> {
    pub method: &'a str,
    /// The path, already in canonical form (`/` for STS).
    pub path: &'a str,
    pub query: &'a [(String, String)],
    /// Signed headers: lower-case names, trimmed values.
    pub headers: &'a [(&'a str, &'a str)],
    /// Hex SHA-256 of the body (or `UNSIGNED-PAYLOAD`).
    pub payload_hash: &'a str,
}

impl CanonicalRequest<'_> {
    /// `host;x-amz-date`: the signed header names, sorted.
    pub(crate) fn signed_headers(&self) -> String {
        let mut names: Vec<&str> = self.headers.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.join(";")
    }

    /// The canonical request text.
    pub(crate) fn text(&self) -> String {
        let mut headers: Vec<&(&str, &str)> = self.headers.iter().collect();
        headers.sort_unstable_by_key(|(n, _)| *n);
        let canonical_headers: String = headers
            .iter()
            .map(|(n, v)| format!("{n}:{}\n", v.trim()))
            .collect();
        format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.method,
            self.path,
            canonical_query(self.query),
            canonical_headers,
            self.signed_headers(),
            self.payload_hash
        )
    }
}

/// The hex signature of `request` in `scope` with `secret_access_key`.
pub(crate) fn signature(
    secret_access_key: &str,
    scope: &Scope<'_>,
    request: &CanonicalRequest<'_>,
) -> String {
    let string_to_sign = format!(
        "{ALGORITHM}\n{}\n{}\n{}",
        scope.amz_date,
        scope.credential_scope(),
        sha256_hex(request.text().as_bytes())
    );
    let mac = |key: &[u8], data: &str| {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
    };
    let date = &scope.amz_date[..scope.amz_date.len().min(8)];
    let k_date = mac(format!("AWS4{secret_access_key}").as_bytes(), date);
    let k_region = mac(k_date.as_ref(), scope.region);
    let k_service = mac(k_region.as_ref(), scope.service);
    let k_signing = mac(k_service.as_ref(), "aws4_request");
    hex(mac(k_signing.as_ref(), &string_to_sign).as_ref())
}

/// Presigns a `GET` of `host` `/` with `params`: adds the `X-Amz-*` parameters (the
/// session token among the signed ones, as STS wants) and returns the query string with
/// `X-Amz-Signature` last.
pub(crate) fn presign_query(
    keys: &SigningKeys,
    scope: &Scope<'_>,
    params: &[(&str, &str)],
    headers: &[(&str, &str)],
    expires_secs: u32,
) -> String {
    let mut names: Vec<&str> = headers.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    let mut query: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    query.extend([
        ("X-Amz-Algorithm".to_owned(), ALGORITHM.to_owned()),
        (
            "X-Amz-Credential".to_owned(),
            format!("{}/{}", keys.access_key_id, scope.credential_scope()),
        ),
        ("X-Amz-Date".to_owned(), scope.amz_date.to_owned()),
        ("X-Amz-Expires".to_owned(), expires_secs.to_string()),
        ("X-Amz-SignedHeaders".to_owned(), names.join(";")),
    ]);
    if let Some(token) = &keys.session_token {
        query.push(("X-Amz-Security-Token".to_owned(), token.clone()));
    }
    let request = CanonicalRequest {
        method: "GET",
        path: "/",
        query: &query,
        headers,
        payload_hash: &sha256_hex(b""),
    };
    let signature = signature(&keys.secret_access_key, scope, &request);
    format!("{}&X-Amz-Signature={signature}", canonical_query(&query))
}

/// The `Authorization` header of a request whose other signed headers (`host`,
/// `x-amz-date`, `x-amz-security-token` when there is a session token, …) are in
/// `request.headers`.
pub(crate) fn authorization(
    keys: &SigningKeys,
    scope: &Scope<'_>,
    request: &CanonicalRequest<'_>,
) -> String {
    format!(
        "{ALGORITHM} Credential={}/{}, SignedHeaders={}, Signature={}",
        keys.access_key_id,
        scope.credential_scope(),
        request.signed_headers(),
        signature(&keys.secret_access_key, scope, request)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The credentials of AWS's SigV4 test suite.
    fn suite_keys() -> SigningKeys {
        SigningKeys {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        }
    }

    /// `get-vanilla-query-order-key-case` of AWS's SigV4 test suite:
    /// `GET /?Param2=value2&Param1=value1`, header-signed.
    #[test]
    fn matches_the_sigv4_suites_get_vanilla_query_order_key_case() {
        let scope = Scope {
            amz_date: "20150830T123600Z",
            region: "us-east-1",
            service: "service",
        };
        let query = [
            ("Param2".to_owned(), "value2".to_owned()),
            ("Param1".to_owned(), "value1".to_owned()),
        ];
        let empty = sha256_hex(b"");
        let request = CanonicalRequest {
            method: "GET",
            path: "/",
            query: &query,
            headers: &[
                ("host", "example.amazonaws.com"),
                ("x-amz-date", "20150830T123600Z"),
            ],
            payload_hash: &empty,
        };
        assert_eq!(
            sha256_hex(request.text().as_bytes()),
            "816cd5b414d056048ba4f7c5386d6e0533120fb1fcfa93762cf0fc39e2cf19e0"
        );
        assert_eq!(
            authorization(&suite_keys(), &scope, &request),
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
        );
    }

    /// The presigned-URL example of the S3 documentation ("authenticating requests: using
    /// query parameters"): `GET /test.txt`, 86400 s, unsigned payload.
    #[test]
    fn matches_the_documented_presigned_url_example() {
        let keys = SigningKeys {
            access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        let scope = Scope {
            amz_date: "20130524T000000Z",
            region: "us-east-1",
            service: "s3",
        };
        let query: Vec<(String, String)> = [
            ("X-Amz-Algorithm", ALGORITHM),
            (
                "X-Amz-Credential",
                "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request",
            ),
            ("X-Amz-Date", "20130524T000000Z"),
            ("X-Amz-Expires", "86400"),
            ("X-Amz-SignedHeaders", "host"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let request = CanonicalRequest {
            method: "GET",
            path: "/test.txt",
            query: &query,
            headers: &[("host", "examplebucket.s3.amazonaws.com")],
            payload_hash: "UNSIGNED-PAYLOAD",
        };
        assert_eq!(
            canonical_query(&query),
            "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524\
             %2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400\
             &X-Amz-SignedHeaders=host"
        );
        assert_eq!(
            signature(&keys.secret_access_key, &scope, &request),
            "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        );
    }

    #[test]
    fn encodes_what_sigv4_reserves() {
        assert_eq!(uri_encode("a b+c/d=e~f_g.h-i"), "a%20b%2Bc%2Fd%3De~f_g.h-i");
        assert_eq!(uri_encode("é"), "%C3%A9");
    }

    #[test]
    fn debug_shows_no_secret() {
        let keys = SigningKeys {
            session_token: Some("s3cret-session".into()),
            secret_access_key: "s3cret-key".into(),
            ..suite_keys()
        };
        let shown = format!("{keys:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("AKIDEXAMPLE"), "{shown}");
    }
}
