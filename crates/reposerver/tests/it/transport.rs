//! Transport: TLS modes, timeouts, the concurrency bound, errors.
