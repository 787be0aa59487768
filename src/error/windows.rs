//! Windows' error numbers in the crate's errno vocabulary.
//!
//! A failed socket call on Windows reports a Winsock code (`WSAECONNREFUSED`, 10061) or a Win32
//! one (`ERROR_FILE_NOT_FOUND` from a named pipe), not an errno. [`errno`] maps them to the
//! errnos (the C runtime's, which the libc crate names on Windows) that [`super::errno_name`]
//! knows, as libuv's `uv_translate_sys_error` maps them to its own codes, so that a refused
//! connect is `ECONNREFUSED` on Windows as on Linux. [`uv_errno`] is then Node's `err.errno`
//! for such an errno: on Windows libuv numbers its codes itself (`UV_ECONNREFUSED` is -4078),
//! where on Unix they are the negated errnos.

use windows_sys::Win32::Foundation as win32;
use windows_sys::Win32::Networking::WinSock as wsa;

/// Windows' codes and the errno each stands for: libuv's table (src/win/error.c), for the
/// errnos the crate names, and `WSAENETDOWN`, which libuv leaves unknown.
const CODES: &[(i32, i32)] = &[
    (wsa::WSAEACCES, libc::EACCES),
    (win32::ERROR_ACCESS_DENIED as i32, libc::EACCES),
    (win32::ERROR_NOACCESS as i32, libc::EACCES),
    (wsa::WSAEADDRINUSE, libc::EADDRINUSE),
    (
        win32::ERROR_ADDRESS_ALREADY_ASSOCIATED as i32,
        libc::EADDRINUSE,
    ),
    (wsa::WSAEADDRNOTAVAIL, libc::EADDRNOTAVAIL),
    (wsa::WSAEAFNOSUPPORT, libc::EAFNOSUPPORT),
    (wsa::WSAEWOULDBLOCK, libc::EAGAIN),
    (wsa::WSAEALREADY, libc::EALREADY),
    (win32::ERROR_INVALID_HANDLE as i32, libc::EBADF),
    (win32::ERROR_PIPE_BUSY as i32, libc::EBUSY),
    (win32::ERROR_OPERATION_ABORTED as i32, libc::ECANCELED),
    (wsa::WSAEINTR, libc::ECANCELED),
    (wsa::WSAECONNABORTED, libc::ECONNABORTED),
    (win32::ERROR_CONNECTION_ABORTED as i32, libc::ECONNABORTED),
    (wsa::WSAECONNREFUSED, libc::ECONNREFUSED),
    (win32::ERROR_CONNECTION_REFUSED as i32, libc::ECONNREFUSED),
    (wsa::WSAECONNRESET, libc::ECONNRESET),
    (win32::ERROR_NETNAME_DELETED as i32, libc::ECONNRESET),
    (wsa::WSAEHOSTUNREACH, libc::EHOSTUNREACH),
    (win32::ERROR_HOST_UNREACHABLE as i32, libc::EHOSTUNREACH),
    (wsa::WSAEINVAL, libc::EINVAL),
    (wsa::WSAEPFNOSUPPORT, libc::EINVAL),
    (win32::ERROR_INVALID_PARAMETER as i32, libc::EINVAL),
    (win32::ERROR_INVALID_DATA as i32, libc::EINVAL),
    (win32::ERROR_INSUFFICIENT_BUFFER as i32, libc::EINVAL),
    (wsa::WSAEISCONN, libc::EISCONN),
    (wsa::WSAEMFILE, libc::EMFILE),
    (win32::ERROR_TOO_MANY_OPEN_FILES as i32, libc::EMFILE),
    (win32::ERROR_FILENAME_EXCED_RANGE as i32, libc::ENAMETOOLONG),
    (wsa::WSAENETDOWN, libc::ENETDOWN),
    (wsa::WSAENETUNREACH, libc::ENETUNREACH),
    (win32::ERROR_NETWORK_UNREACHABLE as i32, libc::ENETUNREACH),
    (wsa::WSAENOBUFS, libc::ENOBUFS),
    (win32::ERROR_FILE_NOT_FOUND as i32, libc::ENOENT),
    (win32::ERROR_PATH_NOT_FOUND as i32, libc::ENOENT),
    (win32::ERROR_BAD_PATHNAME as i32, libc::ENOENT),
    (win32::ERROR_INVALID_NAME as i32, libc::ENOENT),
    (win32::ERROR_DIRECTORY as i32, libc::ENOENT),
    (win32::ERROR_NOT_ENOUGH_MEMORY as i32, libc::ENOMEM),
    (win32::ERROR_OUTOFMEMORY as i32, libc::ENOMEM),
    (wsa::WSAENOTCONN, libc::ENOTCONN),
    (win32::ERROR_NOT_CONNECTED as i32, libc::ENOTCONN),
    (wsa::WSAENOTSOCK, libc::ENOTSOCK),
    (win32::ERROR_PRIVILEGE_NOT_HELD as i32, libc::EPERM),
    (wsa::WSAESHUTDOWN, libc::EPIPE),
    (win32::ERROR_BAD_PIPE as i32, libc::EPIPE),
    (win32::ERROR_NO_DATA as i32, libc::EPIPE),
    (win32::ERROR_PIPE_NOT_CONNECTED as i32, libc::EPIPE),
    // libuv reads it as the end of the stream; a write that meets it has lost its peer.
    (win32::ERROR_BROKEN_PIPE as i32, libc::EPIPE),
    (wsa::WSAETIMEDOUT, libc::ETIMEDOUT),
    (win32::ERROR_SEM_TIMEOUT as i32, libc::ETIMEDOUT),
];

/// The errno a Winsock or Win32 error code stands for; `None` for one the crate has no name
/// for (the caller falls back on the error's kind).
pub fn errno(code: i32) -> Option<i32> {
    CODES.iter().find(|&&(c, _)| c == code).map(|&(_, e)| e)
}

/// libuv's number on Windows for an errno (include/uv/errno.h: Windows has no errno of its
/// own for sockets, so libuv numbers them from -4095 up). An errno without one is `EIO`'s, as
/// [`super::errno_name`] names it `EIO`.
pub fn uv_errno(errno: i32) -> i32 {
    match errno {
        libc::EACCES => -4092,
        libc::EADDRINUSE => -4091,
        libc::EADDRNOTAVAIL => -4090,
        libc::EAFNOSUPPORT => -4089,
        libc::EAGAIN => -4088,
        libc::EALREADY => -4084,
        libc::EBADF => -4083,
        libc::EBUSY => -4082,
        libc::ECANCELED => -4081,
        libc::ECONNABORTED => -4079,
        libc::ECONNREFUSED => -4078,
        libc::ECONNRESET => -4077,
        libc::EHOSTUNREACH => -4073,
        libc::EINVAL => -4071,
        libc::EISCONN => -4069,
        libc::EMFILE => -4066,
        libc::ENAMETOOLONG => -4064,
        libc::ENETDOWN => -4063,
        libc::ENETUNREACH => -4062,
        libc::ENFILE => -4061,
        libc::ENOBUFS => -4060,
        libc::ENOENT => -4058,
        libc::ENOMEM => -4057,
        libc::ENOTCONN => -4053,
        libc::ENOTDIR => -4052,
        libc::ENOTSOCK => -4050,
        libc::EPERM => -4048,
        libc::EPIPE => -4047,
        libc::EPROTO => -4046,
        libc::ETIMEDOUT => -4039,
        _ => -4070,
    }
}
