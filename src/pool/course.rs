//! A pooled connection's course, as the JavaScript thread drives it: where it is in its life,
//! which request path it serves, whether its socket reads and keeps the process alive, whether
//! its peer's end came; the bytes of a drop-in request a replay may send again, and what is
//! written while the replay's connection opens; which of its network connections is current;
//! what a socket object made for it later shows (see [`Stamp`]).
//!
//! From these alone come the decisions the binding applies to the transport: which events the
//! socket is watched for, whether a write goes out, waits behind a replay or finds no
//! connection, whether a connection lost in use sends its request again, and when an error
//! waits a turn of the event loop. The binding keeps the transport (the socket and its poll
//! handle, the pump, hyper's senders) and the JavaScript socket, and asks here.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use super::conn::{Carrier, Conn, Mode, State};
use crate::error::Error;
use crate::replay::{Ending, ReplayBuf};

/// What a socket object made for a connection shows of it: agentkeepalive's socket symbols
/// and `timeout`, kept here so that a socket made for an idle connection (when a program looks
/// at `agent.freeSockets` after its old one was collected, or for an `agent.request()`
/// connection, which has none) says the same: when it was created (ms since the epoch), its
/// number among its agent's sockets (for its name; -1 until a socket is made for it), how many
/// requests it finished and how long it may idle now (ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stamp {
    pub created_ms: f64,
    pub number: f64,
    pub finished: u32,
    pub idle_ms: f64,
}

/// What a connection's socket is watched for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watch {
    /// Data, its peer's end, or an error.
    pub readable: bool,
    /// Room for the bytes the kernel has not taken yet.
    pub writable: bool,
}

/// What becomes of bytes written to a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// They go out now (recorded, while a replay may need them).
    Send,
    /// A replay's connection is opening: they follow the replayed request once it is up.
    Held,
    /// There is no connection to write to.
    NotConnected,
}

/// What kind of event a pumped connection's pump told (see [`Course::heard`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Told {
    Data,
    /// The peer ended its side.
    End,
    Error,
}

/// What becomes of an event of a connection pumped on tokio (see [`Course::heard`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Heard {
    /// Its socket hears it now.
    Deliver,
    /// It waits one turn of the event loop (an error right behind data).
    Wait,
    /// The connection idles: any event means it is over, and it is evicted.
    Evict,
    /// Nobody hears it: it is of a link a replay replaced, or the connection is opening,
    /// replaying or closed.
    Drop,
}

/// What a poll error on a plain socket in use does (see [`Course::after_poll_error`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PollError {
    /// Data came before it and the connection is still in use: the error waits a turn of the
    /// event loop (the socket is watched again, and the next poll meets it).
    Later,
    /// The connection is not in use any more (what came before the error ended it): nothing.
    Nothing,
    /// The connection is lost with the error.
    Fail,
}

/// One connection's course (see the module's documentation). Its parts change one at a time,
/// from the JavaScript thread alone, so each is a cell: a call into JavaScript never finds one
/// borrowed.
#[derive(Debug)]
pub struct Course {
    state: Cell<State>,
    mode: Cell<Mode>,
    /// Its socket reads (JavaScript has not stopped it for back-pressure).
    reading: Cell<bool>,
    /// Its socket keeps the process alive while in use (`ref()`, not `unref()`).
    referenced: Cell<bool>,
    /// Its peer's end came, or it failed: it carries no more requests.
    eof: Cell<bool>,
    /// Taken out of the pool's counts (an HTTP upgrade): its socket owns it alone.
    detached: Cell<bool>,
    /// The drop-in request's bytes while they may have to be sent again.
    replay: RefCell<ReplayBuf>,
    /// While a replay's connection opens: the replayed request, then what was written since.
    held: RefCell<Vec<u8>>,
    /// Which of its network connections is current (a replay opens another).
    link: Cell<u32>,
    /// The inbox batch that last brought it data, and whether its end has waited a turn.
    data_batch: Cell<u64>,
    end_waited: Cell<bool>,
    bytes_read: Cell<u64>,
    bytes_written: Cell<u64>,
    stamp: Cell<Stamp>,
}

impl Course {
    /// A connection starting to open, of the drop-in path until said otherwise, created at
    /// `created_ms` (ms since the epoch).
    pub fn new(created_ms: f64) -> Course {
        Course {
            state: Cell::new(State::Connecting),
            mode: Cell::new(Mode::DropIn),
            reading: Cell::new(true),
            referenced: Cell::new(true),
            eof: Cell::new(false),
            detached: Cell::new(false),
            replay: RefCell::new(ReplayBuf::default()),
            held: RefCell::new(Vec::new()),
            link: Cell::new(0),
            data_batch: Cell::new(0),
            end_waited: Cell::new(false),
            bytes_read: Cell::new(0),
            bytes_written: Cell::new(0),
            stamp: Cell::new(Stamp {
                created_ms,
                number: -1.0,
                finished: 0,
                idle_ms: 0.0,
            }),
        }
    }

    pub fn state(&self) -> State {
        self.state.get()
    }

    /// It is connected and in use (a connect finished, or an exchange starts on it), or closed.
    pub fn set_state(&self, state: State) {
        self.state.set(state);
    }

    pub fn mode(&self) -> Mode {
        self.mode.get()
    }

    pub fn set_mode(&self, mode: Mode) {
        self.mode.set(mode);
    }

    pub fn eof(&self) -> bool {
        self.eof.get()
    }

    pub fn reading(&self) -> bool {
        self.reading.get()
    }

    pub fn set_reading(&self, on: bool) {
        self.reading.set(on);
    }

    pub fn set_ref(&self, on: bool) {
        self.referenced.set(on);
    }

    pub fn detached(&self) -> bool {
        self.detached.get()
    }

    /// Takes it out of the pool's counts (an HTTP upgrade); true the first time, while it is
    /// not closed (only then does its slot go back).
    pub fn detach(&self) -> bool {
        !self.detached.replace(true) && self.state.get() != State::Closed
    }

    /// In use, or connecting, for the pool: not detached.
    pub fn serving_checkout(&self) -> bool {
        !self.detached.get() && matches!(self.state.get(), State::Active | State::Connecting)
    }

    /// Idle in the pool's lists: not detached.
    pub fn idle(&self) -> bool {
        !self.detached.get() && self.state.get() == State::Idle
    }

    pub fn link(&self) -> u32 {
        self.link.get()
    }

    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.get()
    }

    pub fn bytes_written(&self) -> u64 {
        self.bytes_written.get()
    }

    pub fn stamp(&self) -> Stamp {
        self.stamp.get()
    }

    /// A socket object was made for it: its number among its agent's sockets.
    pub fn set_number(&self, number: f64) {
        let mut stamp = self.stamp.get();
        stamp.number = number;
        self.stamp.set(stamp);
    }

    /// The connection as the pool's rules see it, carried by `carrier`.
    pub fn facts(&self, carrier: Carrier) -> Conn {
        Conn {
            mode: self.mode.get(),
            state: self.state.get(),
            eof: self.eof.get(),
            carrier,
        }
    }

    /// It starts serving a checkout (`reused`: not a new connection), keeping up to `limit`
    /// bytes of the request for a replay (0: replay off; a hook's stream's bytes never pass
    /// here, so it keeps none): its socket reads and keeps the process alive, as a new socket
    /// does.
    pub fn serve(&self, reused: bool, limit: usize) {
        let limit = if self.mode.get() == Mode::Foreign {
            0
        } else {
            limit
        };
        self.replay.borrow_mut().start(reused, limit);
        self.reading.set(true);
        self.referenced.set(true);
        if self.state.get() == State::Idle {
            self.state.set(State::Active);
        }
    }

    /// Its request finished and it goes back to the pool, to idle for `idle` (`None`: it may
    /// serve a waiter but not idle).
    pub fn finished(&self, idle: Option<Duration>) {
        let mut stamp = self.stamp.get();
        stamp.finished = stamp.finished.saturating_add(1);
        stamp.idle_ms = idle.map_or(0.0, |d| d.as_millis() as f64);
        self.stamp.set(stamp);
    }

    /// It idles in the pool.
    pub fn park(&self) {
        self.state.set(State::Idle);
    }

    /// What its socket is watched for, with bytes queued for the kernel or not: an idle one
    /// for its peer's end or stray bytes, one in use for data while it reads and for room
    /// while bytes wait; one whose connect runs on the watching thread for room, which tells
    /// that the connect ended; nothing while it replays or is closed.
    pub fn watch(&self, queued: bool) -> Watch {
        match self.state.get() {
            State::Connecting => Watch {
                readable: false,
                writable: true,
            },
            State::Idle => Watch {
                readable: true,
                writable: false,
            },
            State::Active => Watch {
                readable: self.reading.get() && !self.eof.get(),
                writable: queued,
            },
            State::Replaying | State::Closed => Watch::default(),
        }
    }

    /// Whether it keeps the process alive: in use and referenced, as an active socket does.
    pub fn holds_loop(&self) -> bool {
        self.state.get() == State::Active && self.referenced.get()
    }

    /// Whether its connect (or a replay's) keeps the process alive: while it is under way and
    /// the socket is referenced. A socket `unref()`'d while it opens lets the process exit, as
    /// a net socket does once its TCP connect is done (the TLS handshake holds nothing).
    pub fn connect_holds_loop(&self) -> bool {
        self.state.get().awaits_connect() && self.referenced.get()
    }

    /// Whether a pump reads it: while its socket reads, and all along while it idles (a close
    /// or stray bytes are seen at once).
    pub fn pump_reads(&self) -> bool {
        self.reading.get() || self.state.get() == State::Idle
    }

    /// Bytes written to it: see [`Gate`]. Those that go out are recorded for a replay; those
    /// written while a replay's connection opens are held behind the replayed request.
    pub fn gate(&self, chunks: &[&[u8]]) -> Gate {
        match self.state.get() {
            State::Active => {
                self.replay.borrow_mut().record(chunks);
                Gate::Send
            }
            State::Replaying => {
                let mut held = self.held.borrow_mut();
                for chunk in chunks {
                    held.extend_from_slice(chunk);
                }
                Gate::Held
            }
            State::Connecting | State::Idle | State::Closed => Gate::NotConnected,
        }
    }

    /// `n` bytes went to the kernel.
    pub fn wrote(&self, n: usize) {
        self.bytes_written
            .set(self.bytes_written.get().saturating_add(n as u64));
    }

    /// `n` bytes of the response came, in inbox batch `batch`: the request was received, and
    /// will not be sent again.
    pub fn read(&self, n: usize, batch: u64) {
        self.bytes_read
            .set(self.bytes_read.get().saturating_add(n as u64));
        self.data_batch.set(batch);
        self.replay.borrow_mut().answered();
    }

    /// Whether an event that comes in inbox batch `batch` right behind data of the same batch
    /// waits a turn of the event loop (once): an error, as a libuv stream meets a read error
    /// only at its next read (a response the data completed ends first); and the peer's end
    /// (`end`) of a connection the data handed over (an upgrade's, detached), whose program
    /// listens to it from the turn after, as a TLS socket of Node's ends then.
    pub fn end_waits(&self, kind: Told, batch: u64) -> bool {
        let waits = match kind {
            Told::Data => false,
            Told::End => self.detached.get(),
            Told::Error => true,
        };
        waits && self.data_batch.get() == batch && !self.end_waited.replace(true)
    }

    /// Whether, at a poll error on its plain socket, what arrived before the error is read
    /// first: while its socket reads.
    pub fn reads_before_error(&self) -> bool {
        self.reading.get() && !self.eof.get()
    }

    /// What a poll error on its plain socket does once what arrived before it was read
    /// (`read_some`: bytes came), as a libuv stream meets a read error only at its next read: a
    /// response the data completed ends first, and its socket goes back to the pool, where the
    /// error only evicts it.
    pub fn after_poll_error(&self, read_some: bool) -> PollError {
        let in_use = self.state.get() == State::Active && !self.eof.get();
        match (in_use, read_some) {
            (false, _) => PollError::Nothing,
            (true, true) => PollError::Later,
            (true, false) => PollError::Fail,
        }
    }

    /// What becomes of an event of kind `kind` of its link `link`, heard in inbox batch
    /// `batch`: in use, its socket hears it, some right behind data of the same batch a turn
    /// later (see [`Course::end_waits`]); idle, any event evicts it; a replaced link's events
    /// are stale.
    pub fn heard(&self, link: u32, kind: Told, batch: u64) -> Heard {
        if link != self.link.get() {
            return Heard::Drop;
        }
        match self.state.get() {
            State::Active if self.end_waits(kind, batch) => Heard::Wait,
            State::Active => Heard::Deliver,
            State::Idle => Heard::Evict,
            State::Connecting | State::Replaying | State::Closed => Heard::Drop,
        }
    }

    /// Its connection died in use, before any answer: if its request may go again (see
    /// `crate::replay`; `target`: where to open a new connection is known), it is held for the
    /// new connection of the next link, and true is returned. Once per request.
    pub fn begin_replay(&self, target: bool) -> bool {
        if self.state.get() != State::Active || !target || !self.replay.borrow().can_replay() {
            return false;
        }
        *self.held.borrow_mut() = self.replay.borrow_mut().take_for_replay();
        self.eof.set(false);
        self.state.set(State::Replaying);
        self.link.set(self.link.get().wrapping_add(1));
        true
    }

    /// The replay's connection is up: what to send first (the request, then what was written
    /// meanwhile).
    pub fn resume(&self) -> Vec<u8> {
        std::mem::take(&mut *self.held.borrow_mut())
    }

    /// Its connection ended in use (`err`; `None`: its peer's FIN) with no replay: what its
    /// socket hears (see `ReplayBuf::ending`). After a plain end, it carries no more requests.
    pub fn ending(&self, err: Option<Error>) -> Ending {
        let ending = self.replay.borrow().ending(err);
        if matches!(ending, Ending::Eof) {
            self.eof.set(true);
        }
        ending
    }

    /// It failed in use: it reads nothing more and carries no more requests.
    pub fn failed(&self) {
        self.eof.set(true);
        self.reading.set(false);
    }

    /// It is closed.
    pub fn close(&self) {
        self.state.set(State::Closed);
    }
}

#[cfg(test)]
mod tests;
