//! Where an `agent.request()` stands in its pool, one place at a time: not placed yet (or
//! between places: served from the queue, sent again), in the pool's queue, waiting for a stream
//! of an HTTP/2 session (or for the connect that may give one), on a connection of its own
//! (connecting, or its exchange running), or on a stream of a session. What its abort undoes,
//! its end frees and `agent.destroy()` does with it follow from its place alone.

use super::WaiterId;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Place {
    #[default]
    Nowhere,
    /// In the pool's queue, as this waiter.
    Queued(WaiterId),
    /// Waiting for a stream (see `pool::streams`).
    StreamWait,
    /// On this connection, of its own.
    Conn(u32),
    /// On a stream of this HTTP/2 session (which may have closed since): its end frees the
    /// stream, not the connection.
    Stream(u32),
}

impl Place {
    /// The connection it is on: its own, or the session of its stream.
    pub fn conn(self) -> Option<u32> {
        match self {
            Place::Conn(c) | Place::Stream(c) => Some(c),
            Place::Nowhere | Place::Queued(_) | Place::StreamWait => None,
        }
    }

    pub fn on_stream(self) -> bool {
        matches!(self, Place::Stream(_))
    }

    /// Whether it waits (in the queue, or for a stream): `agent.destroy()` fails it.
    pub fn waiting(self) -> bool {
        matches!(self, Place::Queued(_) | Place::StreamWait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_on_a_connection_or_waits_never_both() {
        let places = [
            Place::Nowhere,
            Place::Queued(WaiterId(3)),
            Place::StreamWait,
            Place::Conn(7),
            Place::Stream(7),
        ];
        for place in places {
            assert!(!(place.waiting() && place.conn().is_some()), "{place:?}");
        }
        assert_eq!(Place::Stream(7).conn(), Some(7));
        assert!(Place::Stream(7).on_stream() && !Place::Conn(7).on_stream());
        assert!(!Place::Nowhere.waiting() && Place::Nowhere.conn().is_none());
        assert_eq!(Place::default(), Place::Nowhere);
    }
}
