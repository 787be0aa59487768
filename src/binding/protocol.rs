//! The numbers JavaScript and Rust exchange, declared here alone: `binding.protocol()`
//! exports them to `lib/` at load, so none is written in both languages.

/// What JavaScript is told to do next, packed in one number: `id * BASE + kind`.
pub mod verdict {
    /// `checkout`: an idle connection (`id` = connection).
    pub const REUSE: u32 = 0;
    /// `checkout`: a new connection; bind a socket and call `connect` (`id` = connection).
    pub const CONNECT: u32 = 1;
    /// `checkout`: queued (`id` = waiter).
    pub const QUEUED: u32 = 2;
    /// `release`: the connection (and its socket) goes on to this waiter (`id` = waiter).
    pub const HANDOFF: u32 = 0;
    /// `release`/`close`: the connection closed and this waiter may open a new one (`id` = waiter).
    pub const GRANT: u32 = 1;
    /// Nothing to do.
    pub const NONE: f64 = -1.0;
    /// `release`: the connection is idle in the pool.
    pub const IDLE: f64 = -1.0;
    /// `release`: the connection was closed (it could not be kept), nobody waits.
    pub const CLOSED: f64 = -2.0;
    /// `release`: the connection was closed for an `agent.request()` that waited, which opens
    /// another in its slot: the socket that served it is left with nothing.
    pub const RETIRED: f64 = -3.0;

    /// `id * BASE + kind`.
    pub const BASE: u32 = 4;

    pub fn pack(id: u64, kind: u32) -> f64 {
        (id * BASE as u64 + kind as u64) as f64
    }

    /// A move's verdict (see `crate::pool::moves`), as JavaScript reads it.
    pub fn of(verdict: crate::pool::moves::Verdict) -> f64 {
        use crate::pool::moves::Verdict;
        match verdict {
            Verdict::Reuse(id) => pack(u64::from(id), REUSE),
            Verdict::Connect(id) => pack(u64::from(id), CONNECT),
            Verdict::Queued(w) => pack(w.0, QUEUED),
            Verdict::Handoff(w) => pack(w.0, HANDOFF),
            Verdict::Grant(w) => pack(w.0, GRANT),
            Verdict::Idle => IDLE,
            Verdict::Closed => CLOSED,
            Verdict::Retired => RETIRED,
            Verdict::Nothing => NONE,
        }
    }
}

/// What `onConnection` tells of an `agent.request()` connection (undici's dispatcher events).
pub mod connection {
    pub const CONNECT: u32 = 0;
    pub const DISCONNECT: u32 = 1;
    pub const CONNECTION_ERROR: u32 = 2;
    /// A `DISCONNECT` of an idle connection that idled out.
    pub const DISCONNECT_IDLE_TIMEOUT: u32 = 3;
    /// A `DISCONNECT` of an idle connection its server closed (or reset, or wrote to).
    pub const DISCONNECT_OTHER_SIDE: u32 = 4;
    /// A `DISCONNECT` of a connection whose completed exchange left it unfit for another.
    pub const DISCONNECT_RESET: u32 = 5;
    /// A `DISCONNECT` of a connection whose request was aborted.
    pub const DISCONNECT_ABORTED: u32 = 6;
}

/// The JavaScript side's event codes (`lib/request.js` reads them).
pub mod kind {
    pub const HEAD: u32 = 0;
    pub const DATA: u32 = 1;
    pub const END: u32 = 2;
    pub const ERROR: u32 = 3;
    pub const DRAIN: u32 = 4;
    pub const DONE: u32 = 5;
    /// A new TLS session: JavaScript checks the server's name (`checkServerIdentity`) and
    /// answers true for the exchange to start.
    pub const VERIFY: u32 = 6;
    /// A new connection's host is to be resolved by the user's `lookup` (JavaScript answers
    /// through `lookupDone`).
    pub const LOOKUP: u32 = 7;
    /// The response is complete before the request has all gone out (see
    /// `client::Event::Answered`): its body ends now.
    pub const ANSWERED: u32 = 8;
    /// An informational (1xx) response.
    pub const INFO: u32 = 9;
    /// The request goes out on a connection (its id), for a request that asked
    /// ([`super::flags::SENDING`]).
    pub const SENDING: u32 = 10;
    /// Their names, each at its number: JavaScript reads them (`binding.protocol()`).
    pub const NAMES: [&str; 11] = [
        "HEAD", "DATA", "END", "ERROR", "DRAIN", "DONE", "VERIFY", "LOOKUP", "ANSWERED", "INFO",
        "SENDING",
    ];
}

/// What JavaScript answers to [`kind::VERIFY`] when the exchange may start.
pub mod name {
    /// The server's name is right.
    pub const RIGHT: f64 = 1.0;
    /// It is not, but `rejectUnauthorized: false` lets it pass.
    pub const LET_PASS: f64 = 2.0;
    /// A `checkServerIdentity` of the program's let it pass.
    pub const PASSED: f64 = 3.0;

    /// What JavaScript's answer says (none: it threw).
    pub fn check(answer: Option<f64>) -> crate::transport::tls::NameCheck {
        use crate::transport::tls::NameCheck;
        match answer {
            Some(RIGHT) => NameCheck::Right,
            Some(LET_PASS) => NameCheck::LetPass,
            Some(PASSED) => NameCheck::Passed,
            _ => NameCheck::Wrong,
        }
    }
}

/// The request function's arguments, by position: declared here alone, and exported by name in
/// `protocol().requestArgs`, against which lib/request.js checks its call when it loads.
pub mod arg {
    pub const POOL: usize = 0;
    pub const KEY: usize = 1;
    pub const HANDLE: usize = 2;
    pub const METHOD: usize = 3;
    pub const PATH: usize = 4;
    pub const HEADERS: usize = 5;
    pub const BODY: usize = 6;
    pub const STREAMED: usize = 7;
    pub const CONTENT_LENGTH: usize = 8;
    pub const FLAGS: usize = 9;
    pub const HEADERS_TIMEOUT: usize = 10;
    pub const BODY_TIMEOUT: usize = 11;
    pub const REPLAY_LIMIT: usize = 12;
    pub const CONTEXT_NAME: usize = 13;
    /// The trailers' lines (`name\nvalue...`); `true`: they come with the body's end
    /// (`bodyEnd`); null: none.
    pub const TRAILERS: usize = 14;
    pub const COUNT: usize = 15;
    /// Their names, in order.
    pub const NAMES: [&str; COUNT] = [
        "pool",
        "key",
        "handle",
        "method",
        "path",
        "headers",
        "body",
        "streamed",
        "contentLength",
        "flags",
        "headersTimeout",
        "bodyTimeout",
        "replayLimit",
        "contextName",
        "trailers",
    ];
}

/// A request's flags.
pub mod flags {
    /// A request's flags (the request function's `flags`): it says `expect: 100-continue`, and its body
    /// waits for the server's 100 (or a second).
    pub const EXPECT_CONTINUE: u32 = 1;
    /// Its informational (1xx) responses are reported (undici's `onInfo`).
    pub const INFORMATIONAL: u32 = 2;
    /// It hears which connection it goes out on ([`super::kind::SENDING`]), for undici's
    /// `undici:client:sendHeaders` channel.
    pub const SENDING: u32 = 4;
}

/// What a socket's `write` answers (negative values are `-errno`).
pub mod write {
    /// `write` results, as JavaScript reads them (negative values are `-errno`).
    pub const DONE: i32 = 0;
    pub const PENDING: i32 = 1;
}
