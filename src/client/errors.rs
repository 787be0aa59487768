//! hyper's errors in Node's vocabulary: a broken connection is the socket error it wraps (or
//! Node's "socket hang up" / "aborted"), a malformed response is named as llhttp names it.

use std::time::Duration;

use crate::error::Error;
use crate::pool::ConnEnd;

/// No response head within the headers timeout.
pub fn headers_timeout(t: Duration) -> Error {
    Error::tls(
        "ERR_HYPERAGENT_HEADERS_TIMEOUT",
        format!(
            "Headers Timeout Error: no response head within {} ms",
            t.as_millis()
        ),
    )
    .with_timeout(t)
}

/// No body data within the body timeout.
pub fn body_timeout(t: Duration) -> Error {
    Error::tls(
        "ERR_HYPERAGENT_BODY_TIMEOUT",
        format!(
            "Body Timeout Error: no body data within {} ms",
            t.as_millis()
        ),
    )
    .with_timeout(t)
}

/// A response head over the limit, as llhttp reports it.
pub fn header_overflow() -> Error {
    Error::tls("HPE_HEADER_OVERFLOW", "Parse Error: Header overflow")
}

/// A response with both a length and a transfer coding, as llhttp reports it.
pub fn length_and_coding() -> Error {
    Error::tls(
        "HPE_INVALID_TRANSFER_ENCODING",
        "Parse Error: Transfer-Encoding can't be present with Content-Length",
    )
}

/// An HTTP/2 response body that ended short of its `content-length` (a malformed message, RFC
/// 9113 §8.1.1), as h2 reports one that ends so with END_STREAM: a stream error of type
/// PROTOCOL_ERROR, in Node's `http2` terms.
pub fn cut_short() -> Error {
    Error::tls(
        "ERR_HTTP2_STREAM_ERROR",
        "Stream closed with error code NGHTTP2_PROTOCOL_ERROR",
    )
}

/// An HTTP/2 response body its server ended with RST_STREAM (NO_ERROR or CANCEL, which hyper
/// reads as an end) before END_STREAM: cut short, in Node's `http2` terms a stream error.
pub fn reset_before_end() -> Error {
    Error::tls(
        "ERR_HTTP2_STREAM_ERROR",
        "Stream closed before its end (RST_STREAM)",
    )
}

/// A 101 (Switching Protocols) to a request that asked for no upgrade.
pub fn unasked_upgrade() -> Error {
    Error::tls(
        "ERR_HYPERAGENT_HTTP",
        "HTTP error: the server switched protocols (101) for a request that asked for no upgrade",
    )
}

/// `in_body`: the response head had arrived (Node then reports "aborted", not "socket hang up").
pub fn hyper_error(err: &hyper::Error, in_body: bool) -> Error {
    if err.is_parse() && err.to_string().contains("too large") {
        return header_overflow();
    }
    if err.is_parse_status() {
        return Error::tls("HPE_INVALID_STATUS", "Parse Error: Invalid status code");
    }
    if err.is_parse() {
        let what = err.to_string();
        if is_bad_version(err) {
            return Error::tls("HPE_INVALID_VERSION", "Parse Error: Invalid HTTP version");
        }
        let code = if what.contains("content-length") {
            "HPE_INVALID_CONTENT_LENGTH"
        } else if what.contains("transfer-encoding") {
            "HPE_INVALID_TRANSFER_ENCODING"
        } else if what.contains("header") {
            "HPE_INVALID_HEADER_TOKEN"
        } else {
            "HPE_INVALID_CONSTANT"
        };
        return Error::tls(code, format!("Parse Error: {what}"));
    }
    let hang_up = || hang_up(in_body);
    let broken = |io: &std::io::Error| broken(io, in_body);
    // The cause of a broken connection, as the socket reported it. An HTTP/2 connection's
    // socket error is inside h2's error, which names no source.
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(h2) = cause.downcast_ref::<h2::Error>() {
            if let Some(named) = h2_error(h2) {
                return named;
            }
            if let Some(io) = h2.get_io() {
                return broken(io);
            }
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return broken(io);
        }
        source = cause.source();
    }
    if err.is_incomplete_message() || err.is_closed() || err.is_canceled() || dispatch_gone(err) {
        return hang_up();
    }
    if err.is_timeout() {
        return Error::os(libc::ETIMEDOUT, "read");
    }
    Error::tls("ERR_HYPERAGENT_HTTP", format!("HTTP error: {err}"))
}

/// A response from a server that does not speak HTTP/1 (its connection's first bytes are not
/// `HTTP/`: a TLS port spoken to in plain text, say), as llhttp reports it.
pub fn not_http() -> Error {
    Error::tls(
        "HPE_INVALID_CONSTANT",
        "Parse Error: Expected HTTP/, RTSP/ or ICE/",
    )
}

/// hyper's error for a status line whose version is not HTTP/1.0 or HTTP/1.1.
fn is_bad_version(err: &hyper::Error) -> bool {
    err.is_parse() && err.to_string().contains("version")
}

/// What a request that failed with `err` on a connection reports: hyper's error, or, when that
/// names no cause (the connection closed before it took the request), the TLS error the
/// connection ended with, if one did (a TLS 1.3 server's alert for a missing client
/// certificate comes after the handshake, and ends the connection before its first request).
pub fn request_error(err: &hyper::Error, conn: &super::wake::ConnWake) -> Error {
    if std::error::Error::source(err).is_none() {
        if let Some(failure) = conn.failure() {
            return failure;
        }
    }
    // hyper names one fault for every status line that does not start `HTTP/1.0` or
    // `HTTP/1.1`; llhttp tells a version it does not know from bytes of another protocol.
    if is_bad_version(err) && conn.not_http.load(std::sync::atomic::Ordering::Relaxed) {
        return not_http();
    }
    hyper_error(err, false)
}

/// How a connection whose hyper side ended with `err` counts (see `Stats::count_end`): a
/// timeout (an HTTP/2 PING not answered); a fault of the connection (a reset, a TLS alert, an
/// HTTP/2 GOAWAY with an error code, the server's or its own); or its close (a message it cut
/// short by closing).
pub fn conn_end(err: &hyper::Error) -> ConnEnd {
    if err.is_timeout() {
        return ConnEnd::TimedOut;
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(h2) = cause.downcast_ref::<h2::Error>() {
            if h2.is_go_away() && h2.reason().is_some_and(|r| r != h2::Reason::NO_ERROR) {
                return ConnEnd::Failed;
            }
        }
        source = cause.source();
    }
    match tls_failure(err).is_some() || hyper_error(err, false).is_socket_fault() {
        true => ConnEnd::Failed,
        false => ConnEnd::Closed,
    }
}

/// The TLS error (an alert from the server, a record rustls refused) that `err` of hyper's
/// side of a connection carries, if it carries one.
pub fn tls_failure(err: &hyper::Error) -> Option<Error> {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let io = cause.downcast_ref::<std::io::Error>().or_else(|| {
            cause
                .downcast_ref::<h2::Error>()
                .and_then(h2::Error::get_io)
        });
        if let Some(io) = io {
            if io.get_ref().is_some_and(|e| e.is::<rustls::Error>()) {
                return Some(crate::transport::tls::read_error(io));
            }
            return None;
        }
        source = cause.source();
    }
    None
}

/// Node's words for a connection that ended too early (`in_body`: after the response head).
fn hang_up(in_body: bool) -> Error {
    Error::tls(
        "ECONNRESET",
        if in_body { "aborted" } else { "socket hang up" },
    )
}

/// A broken connection's socket error, as Node names it.
fn broken(io: &std::io::Error, in_body: bool) -> Error {
    if io.kind() == std::io::ErrorKind::UnexpectedEof {
        return hang_up(in_body);
    }
    if let Some(parse) = body_parse_error(io) {
        return parse;
    }
    // HTTP/2 gives each stream a copy of its connection's error, its kind and message only:
    // one of no errno and no kind Node names is a connection that broke.
    let tls = io
        .get_ref()
        .is_some_and(|e| e.downcast_ref::<rustls::Error>().is_some());
    if io.raw_os_error().is_none() && !tls && crate::error::errno_of(io) == libc::EIO {
        return hang_up(in_body);
    }
    // A broken pipe is what a write meets (HTTP/2 writes while its streams wait).
    let syscall = if io.kind() == std::io::ErrorKind::BrokenPipe {
        "write"
    } else {
        "read"
    };
    crate::transport::pump::stream_error(io, syscall).as_socket_fault()
}

/// An HTTP/2 stream reset or a GOAWAY, in Node's `http2` terms (`ERR_HTTP2_STREAM_ERROR`,
/// `ERR_HTTP2_GOAWAY_SESSION`, `ERR_HTTP2_SESSION_ERROR`, with nghttp2's names of the error
/// codes); None when it is not one (a broken connection: its socket error says it).
fn h2_error(err: &h2::Error) -> Option<Error> {
    let reason = err.reason()?;
    let name = reason_name(reason);
    Some(if err.is_go_away() && err.is_remote() {
        Error::tls(
            "ERR_HTTP2_GOAWAY_SESSION",
            format!("New streams cannot be created after receiving a GOAWAY ({name})"),
        )
    } else if err.is_go_away() {
        Error::tls(
            "ERR_HTTP2_SESSION_ERROR",
            format!("Session closed with error code {name}"),
        )
    } else {
        Error::tls(
            "ERR_HTTP2_STREAM_ERROR",
            format!("Stream closed with error code {name}"),
        )
    })
}

/// nghttp2's name of an HTTP/2 error code, as Node's messages give it.
fn reason_name(reason: h2::Reason) -> String {
    let code = u32::from(reason);
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(name) => format!("NGHTTP2_{name}"),
        None => format!("{code}"),
    }
}

/// hyper's "dispatch task is gone": the task of the request's connection ended first. On
/// HTTP/2 that task holds only requests it has not sent: waiting in its queue, or for a stream
/// its server's limit let open (an HTTP/2 task ends so when a GOAWAY ended its connection);
/// those it sent are answered by tasks of their own.
fn dispatch_gone(err: &hyper::Error) -> bool {
    err.is_user() && err.to_string().starts_with("dispatch task is gone")
}

/// Whether an HTTP/2 request that failed was certainly not processed by the server, so that
/// it may be sent again whatever its method (RFC 9113 §8.7): the server refused its stream
/// (`REFUSED_STREAM`), or its stream was above the last one a GOAWAY let through; or hyper
/// never sent it (the connection had closed first, or its task ended before it sent it).
pub fn unprocessed(err: &hyper::Error) -> bool {
    if err.is_canceled() || dispatch_gone(err) {
        return true;
    }
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(h2) = cause.downcast_ref::<h2::Error>() {
            return h2.is_remote()
                && (h2.is_go_away() || h2.reason() == Some(h2::Reason::REFUSED_STREAM));
        }
        source = cause.source();
    }
    false
}

/// Whether the server reset an HTTP/2 stream (for a reason other than refusing it): it had
/// the request.
pub fn is_stream_reset(err: &hyper::Error) -> bool {
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        if let Some(h2) = cause.downcast_ref::<h2::Error>() {
            return h2.is_reset() && h2.is_remote();
        }
        source = cause.source();
    }
    false
}

/// A malformed chunked body (or its trailers), as hyper's decoder reports it, named as llhttp
/// names it; None for anything else (a TLS error is an `InvalidData` too, but not hyper's own
/// message).
fn body_parse_error(io: &std::io::Error) -> Option<Error> {
    use std::io::ErrorKind::{InvalidData, InvalidInput};
    if !matches!(io.kind(), InvalidData | InvalidInput) {
        return None;
    }
    let inner = io.get_ref()?;
    if inner.downcast_ref::<rustls::Error>().is_some() {
        return None;
    }
    let what = inner.to_string();
    let lower = what.to_ascii_lowercase();
    let code = if lower.contains("chunk size") || lower.contains("chunk extension") {
        "HPE_INVALID_CHUNK_SIZE"
    } else if lower.contains("trailers")
        && (lower.contains("over limit") || lower.contains("overflow"))
    {
        "HPE_HEADER_OVERFLOW"
    } else if lower.contains("chunk") && (lower.contains(" cr") || lower.contains(" lf")) {
        "HPE_STRICT"
    } else if lower.contains("trailer") || lower.contains("header") {
        "HPE_INVALID_HEADER_TOKEN"
    } else {
        return None;
    };
    Some(Error::tls(code, format!("Parse Error: {what}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Error as IoError, ErrorKind};

    #[test]
    fn http2_errors_are_named_as_node_names_them() {
        let reset = h2::Error::from(h2::Reason::REFUSED_STREAM);
        let err = h2_error(&reset).unwrap();
        assert_eq!(err.code(), "ERR_HTTP2_STREAM_ERROR");
        assert_eq!(
            err.message(),
            "Stream closed with error code NGHTTP2_REFUSED_STREAM"
        );
        assert_eq!(reason_name(h2::Reason::from(0x1234)), "4660");
        assert_eq!(reason_name(h2::Reason::CANCEL), "NGHTTP2_CANCEL");
    }

    #[test]
    fn a_broken_connections_error_is_named_as_node_names_it() {
        let code = |io: IoError, in_body| broken(&io, in_body);
        let reset = code(IoError::from_raw_os_error(libc::ECONNRESET), false);
        assert_eq!((reset.code(), reset.syscall()), ("ECONNRESET", "read"));
        let pipe = code(IoError::from_raw_os_error(libc::EPIPE), false);
        assert_eq!((pipe.code(), pipe.syscall()), ("EPIPE", "write"));
        // A copy of a connection's error (as HTTP/2 gives its streams): kind and message.
        let copied = code(IoError::new(ErrorKind::BrokenPipe, "broken pipe"), false);
        assert_eq!((copied.code(), copied.syscall()), ("EPIPE", "write"));
        let other = code(IoError::other("connection error"), true);
        assert_eq!(
            (other.code(), other.message().as_str()),
            ("ECONNRESET", "aborted")
        );
        let eof = code(IoError::from(ErrorKind::UnexpectedEof), false);
        assert_eq!(
            (eof.code(), eof.message().as_str()),
            ("ECONNRESET", "socket hang up")
        );
        // A TLS error keeps its TLS code.
        let tls = code(
            IoError::new(ErrorKind::InvalidData, rustls::Error::DecryptError),
            false,
        );
        assert_ne!(tls.code(), "ECONNRESET");
    }

    #[test]
    fn timeouts_are_counted_as_timeouts_by_their_kind_not_their_code() {
        let limit = Duration::from_millis(250);
        for err in [headers_timeout(limit), body_timeout(limit)] {
            assert!(err.timed_out(), "{}", err.code());
            assert_eq!(err.timeout_ms(), Some(250));
            assert!(!err.is_socket_fault());
        }
        assert!(!header_overflow().timed_out());
        assert!(!length_and_coding().timed_out());
    }

    #[test]
    fn hyper_body_decoding_errors_are_named_as_llhttp_names_them() {
        let code = |kind, what: &str| body_parse_error(&IoError::new(kind, what.to_string()));
        let named = |kind, what: &str| code(kind, what).map(|e| e.code().to_string());
        assert_eq!(
            named(
                ErrorKind::InvalidInput,
                "Invalid chunk size line: Invalid Size"
            )
            .as_deref(),
            Some("HPE_INVALID_CHUNK_SIZE")
        );
        assert_eq!(
            named(ErrorKind::InvalidData, "invalid chunk size: overflow").as_deref(),
            Some("HPE_INVALID_CHUNK_SIZE")
        );
        assert_eq!(
            named(ErrorKind::InvalidData, "chunk extensions over limit").as_deref(),
            Some("HPE_INVALID_CHUNK_SIZE")
        );
        assert_eq!(
            named(ErrorKind::InvalidInput, "Invalid chunk body CR").as_deref(),
            Some("HPE_STRICT")
        );
        assert_eq!(
            named(ErrorKind::InvalidData, "chunk trailers bytes over limit").as_deref(),
            Some("HPE_HEADER_OVERFLOW")
        );
        assert_eq!(
            named(ErrorKind::InvalidInput, "Invalid header name: x").as_deref(),
            Some("HPE_INVALID_HEADER_TOKEN")
        );
        // Not the decoder's: a TLS error, another kind of failure, an unknown message.
        let tls = IoError::new(ErrorKind::InvalidData, rustls::Error::DecryptError);
        assert!(body_parse_error(&tls).is_none());
        assert!(code(ErrorKind::ConnectionReset, "chunk size").is_none());
        assert!(code(ErrorKind::InvalidData, "something else").is_none());
    }
}
