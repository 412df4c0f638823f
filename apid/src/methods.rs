//! The request methods apid's routes answer, WebDAV's included: what a
//! CORS preflight may ask for ([`crate::cors`]) and the values of the
//! `method` label of `/metrics` ([`crate::metrics`]).

/// Every method some route answers.
pub(crate) const METHODS: [&str; 14] = [
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "PATCH",
    "DELETE",
    "OPTIONS",
    "PROPFIND",
    "PROPPATCH",
    "MKCOL",
    "COPY",
    "MOVE",
    "LOCK",
    "UNLOCK",
];
