use super::*;

const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: a\r\n\r\n";
const POST: &[u8] = b"POST / HTTP/1.1\r\nhost: a\r\ncontent-length: 1\r\n\r\nx";

/// A connection in use, serving a checkout (`reused` or new) with replay on.
fn in_use(reused: bool) -> Course {
    let c = Course::new(0.0);
    c.set_state(State::Active);
    c.serve(reused, 1024);
    c
}

#[test]
fn a_poll_error_behind_data_waits_a_turn() {
    let c = in_use(true);
    assert!(c.reads_before_error());
    assert_eq!(c.after_poll_error(true), PollError::Later);
    assert_eq!(c.after_poll_error(false), PollError::Fail);
    c.set_reading(false);
    assert!(
        !c.reads_before_error(),
        "back-pressure: nothing is read first"
    );
    assert_eq!(c.after_poll_error(false), PollError::Fail);
    c.set_reading(true);
    // What came before the error was a response, then the peer's end.
    c.read(1, 1);
    assert!(matches!(c.ending(None), Ending::Eof));
    assert!(!c.reads_before_error());
    assert_eq!(c.after_poll_error(true), PollError::Nothing);
    let idle = in_use(true);
    idle.park();
    assert_eq!(idle.after_poll_error(false), PollError::Nothing);
}

#[test]
fn watched_for_what_its_state_needs() {
    let c = Course::new(0.0);
    assert_eq!(
        c.watch(false),
        Watch {
            readable: false,
            writable: true
        },
        "while it opens, for the end of its connect"
    );
    c.set_state(State::Replaying);
    assert_eq!(c.watch(true), Watch::default(), "nothing while it replays");
    c.set_state(State::Active);
    let both = Watch {
        readable: true,
        writable: true,
    };
    assert_eq!(c.watch(true), both);
    assert!(!c.watch(false).writable, "room only while bytes wait");
    c.set_reading(false);
    assert!(!c.watch(false).readable, "back-pressure: not read");
    c.set_reading(true);
    c.failed();
    assert_eq!(
        c.watch(false),
        Watch::default(),
        "nothing read after a failure"
    );
    c.park();
    assert_eq!(
        c.watch(true),
        Watch {
            readable: true,
            writable: false
        },
        "idle: watched for an end or stray bytes, whatever it read before"
    );
    c.close();
    assert_eq!(c.watch(true), Watch::default());
}

#[test]
fn keeps_the_process_alive_only_in_use_and_referenced() {
    let c = Course::new(0.0);
    assert!(
        !c.holds_loop(),
        "opening: the connect holds it, not the socket"
    );
    c.set_state(State::Active);
    assert!(c.holds_loop());
    c.set_ref(false);
    assert!(!c.holds_loop());
    c.park();
    c.serve(true, 0);
    assert!(
        c.holds_loop(),
        "a checkout references it again, as a new socket is"
    );
    c.park();
    assert!(
        !c.holds_loop(),
        "idle connections never keep the process alive"
    );
}

#[test]
fn a_connect_keeps_the_process_alive_while_its_socket_is_referenced() {
    let c = Course::new(0.0);
    assert!(c.connect_holds_loop());
    c.set_ref(false);
    assert!(!c.connect_holds_loop(), "unref()'d while it opens");
    c.set_ref(true);
    assert!(c.connect_holds_loop());
    c.set_state(State::Active);
    assert!(!c.connect_holds_loop(), "open: the socket holds it");
    c.set_state(State::Replaying);
    assert!(c.connect_holds_loop(), "a replay's connect");
    c.set_state(State::Closed);
    assert!(!c.connect_holds_loop());
}

#[test]
fn a_pump_reads_an_idle_connection_all_along() {
    let c = in_use(false);
    c.set_reading(false);
    assert!(!c.pump_reads());
    c.park();
    assert!(c.pump_reads());
}

#[test]
fn writes_go_out_wait_behind_a_replay_or_find_no_connection() {
    let c = Course::new(0.0);
    assert_eq!(c.gate(&[GET]), Gate::NotConnected, "not connected yet");
    c.set_state(State::Active);
    assert_eq!(c.gate(&[GET]), Gate::Send);
    c.park();
    assert_eq!(c.gate(&[GET]), Gate::NotConnected, "idle: nobody writes");
    c.close();
    assert_eq!(c.gate(&[GET]), Gate::NotConnected);
}

#[test]
fn a_reused_connection_lost_before_an_answer_replays_its_request_once() {
    let c = in_use(true);
    assert_eq!(c.gate(&[&GET[..10], &GET[10..]]), Gate::Send);
    assert!(!c.begin_replay(false), "nowhere to open a new connection");
    assert!(c.begin_replay(true));
    assert_eq!(c.state(), State::Replaying);
    assert_eq!(c.link(), 1, "the new connection's events are told apart");
    assert_eq!(c.gate(&[b"more"]), Gate::Held);
    let mut expected = GET.to_vec();
    expected.extend_from_slice(b"more");
    assert_eq!(
        c.resume(),
        expected,
        "the request first, then what followed"
    );
    assert!(c.resume().is_empty());
    c.set_state(State::Active);
    assert!(!c.begin_replay(true), "once per request");
}

#[test]
fn no_replay_on_a_new_connection_after_an_answer_or_of_a_post() {
    let fresh = in_use(false);
    fresh.gate(&[GET]);
    assert!(
        !fresh.begin_replay(true),
        "a new connection's server may refuse"
    );

    let answered = in_use(true);
    answered.gate(&[GET]);
    answered.read(5, 1);
    assert!(!answered.begin_replay(true));
    assert_eq!(answered.bytes_read(), 5);

    let post = in_use(true);
    post.gate(&[POST]);
    assert!(!post.begin_replay(true), "not idempotent");

    let unconnected = Course::new(0.0);
    assert!(!unconnected.begin_replay(true));
}

#[test]
fn a_hooks_stream_keeps_nothing_for_a_replay() {
    let c = Course::new(0.0);
    c.set_mode(Mode::Foreign);
    c.set_state(State::Active);
    c.serve(true, 1024);
    c.gate(&[GET]);
    assert!(!c.begin_replay(true));
}

#[test]
fn an_end_with_no_replay_tells_the_socket_and_stops_reuse() {
    let c = in_use(false);
    c.read(1, 1);
    assert!(matches!(c.ending(None), Ending::Eof));
    assert!(c.eof());
    assert!(!c.facts(Carrier::Stream { clean: true }).reusable(|| true));

    let unanswered = in_use(true);
    unanswered.gate(&[POST]);
    match unanswered.ending(None) {
        Ending::Fail(err) => assert_eq!(err.code(), "ECONNRESET"),
        Ending::Eof => panic!("a reused connection's unanswered request fails"),
    }
}

#[test]
fn an_error_behind_data_of_the_same_batch_waits_one_turn_and_so_does_an_upgrades_end() {
    let c = in_use(false);
    c.read(3, 7);
    assert!(!c.end_waits(Told::Data, 7), "data never waits");
    assert!(
        !c.end_waits(Told::End, 7),
        "the end of a pooled connection's stream does not wait"
    );
    assert!(c.end_waits(Told::Error, 7));
    assert!(!c.end_waits(Told::Error, 7), "once");
    let other = in_use(false);
    other.read(3, 7);
    assert!(
        !other.end_waits(Told::Error, 8),
        "data of an earlier batch was delivered"
    );
    let upgraded = in_use(false);
    upgraded.read(3, 7);
    assert!(upgraded.detach());
    assert!(upgraded.end_waits(Told::End, 7), "an upgrade's end waits");
    assert!(!upgraded.end_waits(Told::End, 7), "once");
}

#[test]
fn a_pumped_connections_events_go_by_its_state_and_link() {
    let c = in_use(true);
    c.gate(&[GET]);
    assert_eq!(c.heard(0, Told::Data, 1), Heard::Deliver);
    c.read(4, 1);
    assert_eq!(c.heard(0, Told::End, 1), Heard::Deliver, "the end at once");
    assert_eq!(
        c.heard(0, Told::Error, 1),
        Heard::Wait,
        "an error behind data"
    );
    assert_eq!(c.heard(0, Told::Error, 1), Heard::Deliver, "a turn later");
    let replayed = in_use(true);
    replayed.gate(&[GET]);
    assert!(replayed.begin_replay(true));
    assert_eq!(
        replayed.heard(1, Told::Data, 2),
        Heard::Drop,
        "replaying: nobody hears"
    );
    replayed.set_state(State::Active);
    assert_eq!(
        replayed.heard(0, Told::Error, 2),
        Heard::Drop,
        "the old link's"
    );
    assert_eq!(replayed.heard(1, Told::Error, 2), Heard::Deliver);
    replayed.park();
    assert_eq!(replayed.heard(1, Told::Data, 3), Heard::Evict);
    replayed.close();
    assert_eq!(replayed.heard(1, Told::Data, 3), Heard::Drop);
}

#[test]
fn a_connection_detaches_once_and_leaves_the_views() {
    let c = in_use(false);
    assert!(c.serving_checkout());
    assert!(c.detach());
    assert!(!c.detach(), "its slot went back once");
    assert!(!c.serving_checkout());
    let closed = Course::new(0.0);
    closed.close();
    assert!(
        !closed.detach(),
        "a closed connection's slot went back already"
    );
    let idle = Course::new(0.0);
    idle.park();
    assert!(idle.idle());
}

#[test]
fn its_stamp_counts_finished_requests_and_their_idle_time() {
    let c = Course::new(12.0);
    assert_eq!(
        c.stamp().number,
        -1.0,
        "numbered when a socket is made for it"
    );
    c.set_number(3.0);
    c.finished(Some(Duration::from_millis(1500)));
    c.finished(None);
    let stamp = c.stamp();
    assert_eq!(
        (
            stamp.created_ms,
            stamp.number,
            stamp.finished,
            stamp.idle_ms
        ),
        (12.0, 3.0, 2, 0.0)
    );
    c.wrote(10);
    c.wrote(5);
    assert_eq!(c.bytes_written(), 15);
}
