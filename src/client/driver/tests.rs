use std::collections::{HashMap, HashSet};

use super::*;
use crate::client::open::Facts;
use crate::client::plan::{self, Source};
use crate::pool::conn::{Mode, State};
use crate::pool::moves::Ended;
use crate::pool::multiplex::Sessions;
use crate::pool::{ConnEnd, Fit, Limits, Path, Pool, Wear};

type Log = Rc<RefCell<Vec<String>>>;

/// A request's face: what it is told, in order, in the shared log.
struct Told {
    log: Log,
    held: Cell<bool>,
    /// What its check of a server's name finds.
    name: Cell<NameCheck>,
}

impl Told {
    fn said(&self, what: String) {
        self.log.borrow_mut().push(what);
    }
}

impl Face for Told {
    fn info(&self, status: u16, _: &HeaderLines) {
        self.said(format!("info {status}"));
    }

    fn head(&self, head: Headed<'_>) {
        let reason = head.reason.map(|r| String::from_utf8_lossy(r).into_owned());
        self.said(format!(
            "head {} {reason:?} settled={:?}",
            head.status, head.settled
        ));
    }

    fn data(&self, chunks: &[Bytes]) {
        self.said(format!("data {}", chunks.len()));
    }

    fn end(&self, _: &HeaderLines) {
        self.said("end".into());
    }

    fn error(&self, err: &Error) {
        self.said(format!("error {}", err.code()));
    }

    fn drain(&self) {
        self.said("drain".into());
    }

    fn answered(&self) {
        self.said("answered".into());
    }

    fn done(&self, settled: Settled) {
        self.said(format!("done {} {:?}", settled.conn, settled.verdict));
    }

    fn sending(&self, req: u32, conn: u32, later: bool) {
        let when = if later { " later" } else { "" };
        self.said(format!("sending {req} on {conn}{when}"));
    }

    fn check_name(&self, conn: u32, _: KeyId) -> NameCheck {
        self.said(format!("check name {conn}"));
        self.name.get()
    }

    fn hold(&self) {
        self.held.set(true);
    }

    fn unhold(&self) {
        self.held.set(false);
    }

    fn release(&self, id: u32) {
        self.said(format!("release {id}"));
    }
}

/// A pool of recorded connections, and what was done to them, in the same log as the faces'.
struct Fake {
    pool: RefCell<Pool<u32>>,
    conns: RefCell<HashMap<u32, (KeyId, State)>>,
    next: Cell<u32>,
    /// Connections whose requests wait for them to come up as HTTP/2 sessions.
    pending: RefCell<HashSet<u32>>,
    /// Whether its connections may speak HTTP/2, its sessions, and the open ones' streams.
    http2: Cell<bool>,
    sessions: RefCell<Sessions<u32>>,
    open_sessions: RefCell<HashMap<u32, usize>>,
    /// The requests the pool may serve from its queue.
    requests: RefCell<HashMap<u32, Rc<Request<Told>>>>,
    next_req: Cell<u32>,
    policy: ReleasePolicy,
    log: Log,
    /// Why its connections in use were to close (`Lanes::ending`), apart from the log.
    endings: RefCell<Vec<String>>,
}

impl Fake {
    fn new(max_sockets: usize) -> (Fake, KeyId) {
        let mut pool = Pool::new(Limits {
            max_sockets,
            ..Limits::default()
        });
        let key = pool.key("a:80:");
        let fake = Fake {
            pool: RefCell::new(pool),
            conns: RefCell::new(HashMap::new()),
            next: Cell::new(1),
            pending: RefCell::new(HashSet::new()),
            http2: Cell::new(false),
            sessions: RefCell::new(Sessions::default()),
            open_sessions: RefCell::new(HashMap::new()),
            requests: RefCell::new(HashMap::new()),
            next_req: Cell::new(1),
            policy: ReleasePolicy {
                idle: Some(Duration::from_secs(4)),
                ..ReleasePolicy::default()
            },
            log: Rc::default(),
            endings: RefCell::default(),
        };
        (fake, key)
    }

    fn said(&self, what: String) {
        self.log.borrow_mut().push(what);
    }

    fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.borrow_mut())
    }

    fn set_state(&self, id: u32, state: State) {
        if let Some(c) = self.conns.borrow_mut().get_mut(&id) {
            c.1 = state;
        }
    }

    fn state(&self, id: u32) -> Option<State> {
        self.conns.borrow().get(&id).map(|c| c.1)
    }

    /// A new request of `key` (`method`, with `headers_timeout_ms`), not routed yet.
    fn request(&self, key: KeyId, method: &str, headers_timeout_ms: f64) -> Rc<Request<Told>> {
        let body = match method {
            "POST" => Source::Bytes(Bytes::from_static(b"x")),
            _ => Source::Bytes(Bytes::new()),
        };
        let plan = plan::for_test(method, body, headers_timeout_ms);
        let id = self.next_req.get();
        self.next_req.set(id + 1);
        let face = Told {
            log: self.log.clone(),
            held: Cell::new(false),
            name: Cell::new(NameCheck::Right),
        };
        let req = Rc::new(Request::new(id, key, face, Arc::default(), plan));
        self.requests.borrow_mut().insert(id, req.clone());
        req
    }

    /// `N` GETs of `key`, each routed in turn.
    fn routed<const N: usize>(&self, key: KeyId) -> [Rc<Request<Told>>; N] {
        std::array::from_fn(|_| {
            let req = self.request(key, "GET", 0.0);
            route(self, &req);
            req
        })
    }

    /// A GET of `key`, routed, on a new connection that came up: the connection's id.
    fn on_new(&self, key: KeyId) -> (Rc<Request<Told>>, u32) {
        let req = self.request(key, "GET", 0.0);
        route(self, &req);
        let conn = req.place().conn().expect("on a connection");
        self.set_state(conn, State::Active);
        self.take_log();
        (req, conn)
    }

    /// A connection of `key` that served a request and idles.
    fn idle(&self, key: KeyId) -> u32 {
        let (req, conn) = self.on_new(key);
        on_event(self, &req, Event::Done(Some(sender())));
        assert_eq!(self.state(conn), Some(State::Idle));
        self.take_log();
        conn
    }

    fn begin_on(&self, req: &Rc<Request<Told>>, conn: u32) {
        req.begin(Place::Conn(conn)).expect("not started");
        self.set_state(conn, State::Active);
    }
}

impl Fake {
    /// A `method` request of `key` on a stream of a new HTTP/2 session: the request and the
    /// session.
    fn on_session(&self, key: KeyId, method: &str) -> (Rc<Request<Told>>, u32) {
        self.http2.set(true);
        let req = self.request(key, method, 0.0);
        route(self, &req);
        let conn = req.place().conn().expect("connecting");
        connected(self, conn, req.id, Ok(facts(None, Some(sender()))));
        assert_eq!(req.place(), Place::Stream(conn));
        self.take_log();
        (req, conn)
    }
}

/// What a connect learnt: a new TLS session's name to `verify`, an HTTP/2 `session`.
fn facts(verify: Option<tokio::sync::oneshot::Sender<()>>, session: Option<Sender>) -> Facts {
    Facts {
        local: None,
        remote: Peer::Tcp(SocketAddr::from(([127, 0, 0, 1], 80))),
        tls: None,
        verify,
        session,
    }
}

/// A connection's request half, of a connection nobody runs.
fn sender() -> Sender {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (client, _server) = tokio::io::duplex(1024);
    let (sender, _connection) = rt
        .block_on(crate::client::handshake(client, 16 * 1024))
        .unwrap();
    sender
}

/// A connection reset, as the socket's fault it is.
fn reset() -> Error {
    Error::os(libc::ECONNRESET, "read").as_socket_fault()
}

fn head(done: Option<Option<Sender>>) -> Event {
    Event::Head {
        status: 200,
        reason: std::borrow::Cow::Borrowed(b"OK"),
        headers: HeaderLines::of(&http::HeaderMap::new()),
        chunks: vec![Bytes::from_static(b"hi")],
        end: done
            .as_ref()
            .map(|_| HeaderLines::of(&http::HeaderMap::new())),
        done,
    }
}

impl Connections for Fake {
    fn pool(&self) -> RefMut<'_, Pool<u32>> {
        self.pool.borrow_mut()
    }

    fn sessions(&self) -> RefMut<'_, Sessions<u32>> {
        self.sessions.borrow_mut()
    }

    fn key_of(&self, id: u32) -> Option<KeyId> {
        self.conns.borrow().get(&id).map(|c| c.0)
    }

    fn fit(&self, id: u32, _: Mode) -> Fit {
        match self.state(id) {
            Some(State::Idle) => Fit::Take,
            _ => Fit::Dead,
        }
    }

    fn reusable(&self, id: u32) -> (bool, Path) {
        (self.state(id) == Some(State::Active), Path::Promise)
    }

    fn finished(&self, _: u32, _: Option<Duration>) {}

    fn open(&self, key: KeyId) -> u32 {
        let id = self.next.get();
        self.next.set(id + 1);
        self.conns.borrow_mut().insert(id, (key, State::Connecting));
        self.pool.borrow_mut().opening(key);
        self.said(format!("open {id}"));
        id
    }

    fn park(&self, id: u32) {
        self.set_state(id, State::Idle);
        self.said(format!("park {id}"));
    }

    fn end_idle(&self, id: u32, _: bool) {
        self.conns.borrow_mut().remove(&id);
        self.said(format!("end idle {id}"));
    }

    fn unkept(&self, id: u32) {
        self.endings.borrow_mut().push(format!("Unkept {id}"));
    }

    fn end(&self, id: u32) -> Option<Ended> {
        let (key, state) = self.conns.borrow_mut().remove(&id)?;
        self.said(format!("end {id}"));
        Some(Ended {
            key,
            state,
            detached: false,
        })
    }

    fn detach(&self, _: u32) -> Option<KeyId> {
        None
    }

    fn serve(&self, req: u32, handoff: Option<u32>) -> bool {
        serve(self, req, handoff)
    }

    fn session_end(&self, _id: u32) -> Option<Instant> {
        None
    }
}

impl Lanes for Fake {
    type Face = Told;

    fn request(&self, id: u32) -> Option<Rc<Request<Told>>> {
        let req = self.requests.borrow().get(&id).cloned()?;
        req.face().is_some().then_some(req)
    }

    fn run_connect(&self, req: &Rc<Request<Told>>, conn: u32, _: Spec) {
        self.said(format!("connect {} on {conn}", req.id));
    }

    fn dispatch(&self, req: &Rc<Request<Told>>, conn: u32) {
        self.said(format!("dispatch {} on {conn}", req.id));
        self.begin_on(req, conn);
    }

    fn stream_on(&self, req: &Rc<Request<Told>>, conn: u32) {
        self.said(format!("stream {} on {conn}", req.id));
        req.begin(Place::Stream(conn)).expect("not started");
    }

    fn http2(&self) -> bool {
        self.http2.get()
    }

    fn session(&self, conn: u32) -> Option<(Duration, usize, Option<usize>)> {
        let max = *self.open_sessions.borrow().get(&conn)?;
        Some((Duration::from_secs(1), max, Some(max)))
    }

    fn expire_sessions(&self) {
        self.said("sessions idle".into());
    }

    fn notify_grants(&self, grant: Option<Grant>) {
        for w in moves::grant_all(self, grant) {
            self.said(format!("grant {}", w.0));
        }
    }

    fn pend_session(&self, conn: u32) {
        self.pending.borrow_mut().insert(conn);
    }

    fn take_pending_session(&self, conn: u32) -> bool {
        self.pending.borrow_mut().remove(&conn)
    }

    fn in_use(&self, conn: u32) -> Option<Wear> {
        (self.state(conn) == Some(State::Active)).then_some(Wear {
            age: Duration::from_secs(1),
            requests: 1,
        })
    }

    fn keep(&self, conn: u32, _: Sender) {
        self.said(format!("keep {conn}"));
    }

    fn policy(&self) -> ReleasePolicy {
        self.policy
    }

    fn drained(&self, _: u32) -> impl Fn() + Send + Sync + 'static {
        || {}
    }

    fn watch_deadlines(&self) {
        self.said("watch".into());
    }

    fn established(&self, conn: u32, _: Option<SocketAddr>, _: Peer, _: Option<Box<TlsInfo>>) {
        self.set_state(conn, State::Active);
        self.said(format!("up {conn}"));
    }

    fn make_session(&self, conn: u32, _: Sender) {
        self.open_sessions.borrow_mut().insert(conn, 2);
        self.said(format!("session {conn}"));
    }

    fn name_checked(&self, conn: u32, check: NameCheck) {
        self.said(format!("name on {conn}: {check:?}"));
    }

    fn announce(&self, conn: u32) {
        self.said(format!("announce {conn}"));
    }

    fn ending(&self, conn: u32, why: super::Ending<'_>) {
        let why = match why {
            super::Ending::Failed(err) => format!("failed {}", err.code()),
            other => format!("{other:?}"),
        };
        self.endings.borrow_mut().push(format!("{why} {conn}"));
    }

    fn lost(&self, conn: u32, err: &Error) {
        self.conns.borrow_mut().remove(&conn);
        self.said(format!("lost {conn} {}", err.code()));
    }
}

#[test]
fn an_exchange_over_with_its_head_settles_its_connection_before_the_head_is_told() {
    let (f, key) = Fake::new(10);
    let (req, conn) = f.on_new(key);
    assert!(req.face.held.get());
    on_event(&f, &req, head(Some(Some(sender()))));
    assert_eq!(
        f.take_log(),
        [
            format!("keep {conn}"),
            format!("park {conn}"),
            format!(
                "head 200 Some(\"OK\") settled=Some(Settled {{ conn: {conn}, verdict: Idle }})"
            ),
            format!("release {}", req.id),
        ]
    );
    assert!(!req.face.held.get(), "the event loop is let go");
    assert_eq!(f.pool.borrow().stats.request_count, 1);
    // Over: nothing more is told.
    on_event(&f, &req, Event::Done(None));
    assert_eq!(f.take_log(), Vec::<String>::new());
}

#[test]
fn a_response_streamed_after_its_head_settles_at_its_done() {
    let (f, key) = Fake::new(10);
    let (req, conn) = f.on_new(key);
    on_event(&f, &req, head(None));
    on_event(&f, &req, Event::Data(vec![Bytes::from_static(b"x")]));
    on_event(
        &f,
        &req,
        Event::End(HeaderLines::of(&http::HeaderMap::new())),
    );
    assert_eq!(
        f.take_log(),
        ["head 200 Some(\"OK\") settled=None", "data 1", "end"]
    );
    // hyper did not keep the connection: it closes.
    on_event(&f, &req, Event::Done(None));
    assert_eq!(
        f.take_log(),
        [
            format!("end {conn}"),
            format!("done {conn} Nothing"),
            format!("release {}", req.id)
        ]
    );
    assert_eq!(f.pool.borrow().stats.close_socket_count, 1);
}

#[test]
fn a_response_body_its_consumer_stops_asking_for_lets_the_event_loop_go_until_it_asks_again() {
    let (f, key) = Fake::new(10);
    let (req, _) = f.on_new(key);
    let held = || req.face.held.get();
    assert!(
        held(),
        "connected and sent: the exchange works on the network"
    );
    // The head, with a body to come: nothing of it asked for yet, so the exchange waits on the
    // consumer (a paused socket in Node holds no loop either).
    on_event(&f, &req, head(None));
    assert!(!held());
    // The consumer reads: a window is asked for; the loop stays alive while it comes.
    req.granted();
    assert!(held());
    on_event(
        &f,
        &req,
        Event::Data(vec![Bytes::from(vec![0; BODY_WINDOW / 2])]),
    );
    assert!(held(), "half the window given: more is on its way");
    on_event(
        &f,
        &req,
        Event::Data(vec![Bytes::from(vec![0; BODY_WINDOW / 2])]),
    );
    assert!(
        !held(),
        "the window given and the consumer asks no more: it waits on it"
    );
    req.granted();
    assert!(held());
    // The end: the exchange's own work (settling its connection) holds the loop until done.
    on_event(&f, &req, Event::Data(vec![Bytes::from_static(b"x")]));
    on_event(
        &f,
        &req,
        Event::End(HeaderLines::of(&http::HeaderMap::new())),
    );
    assert!(held());
    on_event(&f, &req, Event::Done(None));
    assert!(!held());
    // A grant after the end holds nothing.
    req.granted();
    assert!(!held());

    // A response that came whole with its head never waits on a consumer.
    let (whole, _) = f.on_new(key);
    on_event(&f, &whole, head(Some(None)));
    assert!(!whole.face.held.get(), "done with its head");
    whole.granted();
    assert!(!whole.face.held.get());
}

#[test]
fn a_request_still_streaming_its_body_out_keeps_the_loop_while_its_response_waits() {
    let (f, key) = Fake::new(10);
    let plan = plan::for_test("POST", Source::Streamed, 0.0);
    let face = Told {
        log: f.log.clone(),
        held: Cell::new(false),
        name: Cell::new(NameCheck::Right),
    };
    let req = Rc::new(Request::new(99, key, face, Arc::default(), plan));
    f.requests.borrow_mut().insert(99, req.clone());
    route(&f, &req);
    let conn = req.place().conn().expect("on a connection");
    f.set_state(conn, State::Active);
    // An early answer while the body still goes out: the upload keeps the loop alive.
    on_event(&f, &req, head(None));
    assert!(req.face.held.get());
    // Its source ends: now only the unread response is left, which waits on its consumer.
    req.source_ended();
    assert!(!req.face.held.get());
    req.granted();
    assert!(req.face.held.get());
    on_event(
        &f,
        &req,
        Event::Data(vec![Bytes::from(vec![0; BODY_WINDOW])]),
    );
    assert!(!req.face.held.get());
}

#[test]
fn an_idempotent_request_that_meets_the_keep_alive_race_goes_again_once_on_a_new_connection() {
    let (f, key) = Fake::new(10);
    let idle = f.idle(key);
    let req = f.request(key, "GET", 0.0);
    route(&f, &req);
    assert_eq!(req.place(), Place::Conn(idle), "reused");
    f.take_log();

    on_event(&f, &req, Event::Unsent(reset()));
    assert_eq!(f.take_log(), Vec::<String>::new(), "the error waits");
    on_event(&f, &req, Event::Done(None));
    let fresh = idle + 1;
    assert_eq!(
        f.take_log(),
        [
            format!("end {idle}"),
            format!("open {fresh}"),
            format!("connect {} on {fresh}", req.id)
        ]
    );
    assert_eq!(req.place(), Place::Conn(fresh));
    assert!(req.face.held.get(), "its connect runs");
    let stats = f.pool.borrow().stats;
    assert_eq!(
        (
            stats.replay_count,
            stats.error_socket_count,
            stats.close_socket_count
        ),
        (1, 1, 1)
    );

    // Its second attempt, on the new connection, fails as it is: the replay is spent.
    f.set_state(fresh, State::Active);
    on_event(&f, &req, Event::Unsent(reset()));
    on_event(&f, &req, Event::Done(None));
    assert_eq!(
        f.take_log(),
        [
            "error ECONNRESET".to_owned(),
            format!("end {fresh}"),
            format!("done {fresh} Nothing"),
            format!("release {}", req.id),
        ]
    );
    assert_eq!(f.pool.borrow().stats.replay_count, 1);
}

#[test]
fn a_post_that_meets_the_keep_alive_race_fails_with_its_error() {
    let (f, key) = Fake::new(10);
    let idle = f.idle(key);
    let req = f.request(key, "POST", 0.0);
    route(&f, &req);
    f.take_log();
    on_event(&f, &req, Event::Unsent(reset()));
    on_event(&f, &req, Event::Done(None));
    assert_eq!(
        f.take_log(),
        [
            "error ECONNRESET".to_owned(),
            format!("end {idle}"),
            format!("done {idle} Nothing"),
            format!("release {}", req.id),
        ]
    );
    assert_eq!(f.pool.borrow().stats.replay_count, 0);
}

#[test]
fn a_refused_stream_drains_its_session_and_the_request_is_routed_again() {
    let (f, key) = Fake::new(10);
    let (req, session) = f.on_session(key, "POST");
    on_event(&f, &req, Event::Refused(reset()));
    assert_eq!(
        f.take_log(),
        Vec::<String>::new(),
        "not told: it goes again"
    );
    on_event(&f, &req, Event::Done(None));
    // The session, drained of its last stream, closes; the request is routed as a new one
    // (not on a connection of its own).
    assert_eq!(
        f.take_log(),
        [
            format!("end {session}"),
            "open 2".into(),
            "connect 1 on 2".into()
        ]
    );
    assert_eq!(f.pool.borrow().stats.replay_count, 1);
}

#[test]
fn a_completed_stream_frees_its_stream_and_counts_as_a_request() {
    let (f, key) = Fake::new(10);
    let (req, session) = f.on_session(key, "GET");
    on_event(&f, &req, head(Some(Some(sender()))));
    assert_eq!(
        f.take_log(),
        [
            "sessions idle".to_owned(),
            format!("head 200 None settled=Some(Settled {{ conn: {session}, verdict: Nothing }})"),
            "release 1".into()
        ],
        "HTTP/2 has no reason phrase"
    );
    assert_eq!(f.pool.borrow().stats.request_count, 1);

    // One that failed frees its stream but counts as no request.
    let req = f.request(key, "GET", 0.0);
    route(&f, &req);
    assert_eq!(
        req.place(),
        Place::Stream(session),
        "the idle session serves it"
    );
    on_event(&f, &req, Event::Done(None));
    assert_eq!(
        f.take_log(),
        [
            format!("stream 2 on {session}"),
            format!("sending 2 on {session} later"),
            "sessions idle".into(),
            format!("done {session} Nothing"),
            "release 2".into()
        ]
    );
    assert_eq!(f.pool.borrow().stats.request_count, 1);
}

#[test]
fn requests_wait_for_a_connect_that_may_speak_http2_then_share_its_session() {
    let (f, key) = Fake::new(10);
    f.http2.set(true);
    let reqs: [_; 3] = f.routed(key);
    assert_eq!(f.take_log(), ["open 1", "connect 1 on 1"], "one connect");
    assert_eq!(reqs[1].place(), Place::StreamWait);
    assert_eq!(reqs[2].place(), Place::StreamWait);
    // Its session takes two streams at once: the third request, past its room, goes to the
    // pool's checkout, which opens another connection.
    connected(&f, 1, 1, Ok(facts(None, Some(sender()))));
    assert_eq!(
        f.take_log(),
        [
            "up 1",
            "announce 1",
            "session 1",
            "stream 2 on 1",
            "sending 2 on 1 later",
            "open 2",
            "connect 3 on 2",
            "sending 1 on 1"
        ]
    );
    assert_eq!(reqs[0].place(), Place::Stream(1));
    assert_eq!(reqs[1].place(), Place::Stream(1));
    assert_eq!(reqs[2].place(), Place::Conn(2));
    // A fourth takes the stream the first frees.
    let fourth = f.request(key, "GET", 0.0);
    route(&f, &fourth);
    assert_eq!(fourth.place(), Place::StreamWait);
    on_event(&f, &reqs[0], Event::Done(None));
    assert_eq!(
        f.take_log(),
        [
            "stream 4 on 1",
            "sending 4 on 1 later",
            "done 1 Nothing",
            "release 1"
        ],
        "the freed stream serves it"
    );
}

#[test]
fn a_connect_that_comes_up_speaking_http1_sends_its_waiters_to_the_checkout() {
    let (f, key) = Fake::new(10);
    f.http2.set(true);
    let [first, second] = f.routed(key);
    f.take_log();
    connected(&f, 1, first.id, Ok(facts(None, None)));
    assert_eq!(
        f.take_log(),
        [
            "up 1",
            "announce 1",
            "open 2",
            "connect 2 on 2",
            "sending 1 on 1"
        ]
    );
    assert_eq!(first.place(), Place::Conn(1));
    assert_eq!(second.place(), Place::Conn(2));
}

#[test]
fn a_failed_connect_fails_its_request_and_those_that_waited_for_it() {
    let (f, key) = Fake::new(10);
    f.http2.set(true);
    let [first, second] = f.routed(key);
    f.take_log();
    connected(&f, 1, first.id, Err(reset()));
    assert_eq!(
        f.take_log(),
        [
            "lost 1 ECONNRESET",
            "error ECONNRESET",
            "done 0 Nothing",
            "release 2",
            "error ECONNRESET",
            "done 0 Nothing",
            "release 1"
        ]
    );
    let stats = f.pool.borrow().stats;
    assert_eq!((stats.error_socket_count, stats.close_socket_count), (1, 1));
    let busy: usize = f.pool.borrow().snapshot().iter().map(|k| k.busy).sum();
    assert_eq!(busy, 0, "its slot is free");
    assert!(!first.face.held.get() && !second.face.held.get());
}

#[test]
fn a_new_tls_connection_runs_its_exchange_only_once_its_servers_name_is_checked() {
    // Right: the exchange goes on.
    let (f, key) = Fake::new(10);
    let req = f.request(key, "GET", 0.0);
    route(&f, &req);
    f.take_log();
    let (verify, checked) = tokio::sync::oneshot::channel();
    connected(&f, 1, req.id, Ok(facts(Some(verify), None)));
    assert_eq!(
        f.take_log(),
        [
            "up 1",
            "check name 1",
            "name on 1: Right",
            "announce 1",
            "sending 1 on 1"
        ]
    );
    assert_eq!(checked.blocking_recv(), Ok(()));

    // Wrong (and the face did not fail the request itself): it fails, its connection closes
    // unannounced, and the failure counts.
    let req = f.request(key, "GET", 0.0);
    req.face.name.set(NameCheck::Wrong);
    route(&f, &req);
    f.take_log();
    let (verify, checked) = tokio::sync::oneshot::channel();
    connected(&f, 2, req.id, Ok(facts(Some(verify), None)));
    assert_eq!(
        f.take_log(),
        [
            "up 2",
            "check name 2",
            "name on 2: Wrong",
            "error ERR_HYPERAGENT_INTERNAL",
            "end 2",
            "done 2 Nothing",
            "release 2"
        ]
    );
    assert!(checked.blocking_recv().is_err(), "nothing of HTTP goes out");
    assert_eq!(f.pool.borrow().stats.error_socket_count, 1);
}

#[test]
fn a_connection_whose_request_ended_during_its_connect_closes_unless_it_was_checked() {
    // Its server's name never checked: it closes unused, and its slot serves a waiter.
    let (f, key) = Fake::new(1);
    let req = f.request(key, "GET", 0.0);
    route(&f, &req);
    let waiter = f.request(key, "GET", 0.0);
    route(&f, &waiter);
    assert!(matches!(waiter.place(), Place::Queued(_)));
    req.finish();
    f.take_log();
    let (verify, _checked) = tokio::sync::oneshot::channel();
    connected(&f, 1, req.id, Ok(facts(Some(verify), None)));
    assert_eq!(f.take_log(), ["up 1", "end 1", "open 2", "connect 2 on 2"]);

    // A session that its request no longer needs serves the requests that waited for it.
    let (f, key) = Fake::new(10);
    f.http2.set(true);
    let [req, waits] = f.routed(key);
    abort(&f, &req);
    f.take_log();
    assert_eq!(
        waits.place(),
        Place::Conn(2),
        "routed again when the connect was abandoned"
    );
}

#[test]
fn the_close_of_a_connection_frees_what_it_held() {
    // An idle one leaves the pool.
    let (f, key) = Fake::new(10);
    let idle = f.idle(key);
    closed(&f, idle, true, ConnEnd::Failed);
    assert_eq!(f.take_log(), [format!("end idle {idle}")]);
    let idle: usize = f.pool.borrow().snapshot().iter().map(|k| k.idle).sum();
    assert_eq!(idle, 0);
    // Its reset counts as a close alone, as Node's free socket's from Node 22 on.
    let stats = f.pool.borrow().stats;
    assert_eq!((stats.close_socket_count, stats.error_socket_count), (1, 0));

    // A session: its slot goes back, and no request is routed to it any more. Its end is
    // counted once, whatever its streams met: an unanswered PING's timeout here.
    let (f, key) = Fake::new(10);
    let (req, session) = f.on_session(key, "GET");
    on_event(&f, &req, Event::Error(reset()));
    closed(&f, session, false, ConnEnd::TimedOut);
    assert_eq!(
        f.take_log(),
        ["error ECONNRESET".to_string(), format!("end {session}")]
    );
    let busy: usize = f.pool.borrow().snapshot().iter().map(|k| k.busy).sum();
    assert_eq!(busy, 0);
    let stats = f.pool.borrow().stats;
    assert_eq!(
        (stats.error_socket_count, stats.timeout_socket_count),
        (1, 1)
    );
    let next = f.request(key, "GET", 0.0);
    route(&f, &next);
    assert_eq!(next.place(), Place::Conn(session + 1));
}

#[test]
fn a_queued_request_is_served_by_the_connection_given_back() {
    let (f, key) = Fake::new(1);
    let (first, conn) = f.on_new(key);
    let queued = f.request(key, "GET", 0.0);
    route(&f, &queued);
    f.take_log();
    on_event(&f, &first, Event::Done(Some(sender())));
    assert_eq!(
        f.take_log(),
        [
            format!("keep {conn}"),
            format!("dispatch 2 on {conn}"),
            format!("sending 2 on {conn} later"),
            format!("done {conn} Retired"),
            "release 1".into()
        ]
    );
    assert_eq!(queued.place(), Place::Conn(conn));
}

#[test]
fn only_a_failure_of_an_established_connection_counts() {
    let (f, key) = Fake::new(10);
    let req = f.request(key, "GET", 0.0);
    route(&f, &req);
    let conn = req.place().conn().unwrap();
    on_event(&f, &req, Event::Error(reset()));
    assert_eq!(f.pool.borrow().stats.error_socket_count, 0, "connecting");
    f.set_state(conn, State::Active);
    on_event(&f, &req, Event::Error(reset()));
    assert_eq!(f.pool.borrow().stats.error_socket_count, 1);
}

#[test]
fn an_abort_undoes_what_its_place_holds() {
    // In the queue: it leaves it, and a freed connection idles instead of serving it.
    let (f, key) = Fake::new(1);
    let (first, conn) = f.on_new(key);
    let queued = f.request(key, "GET", 0.0);
    route(&f, &queued);
    assert!(matches!(queued.place(), Place::Queued(_)));
    f.take_log();
    assert_eq!(abort(&f, &queued), Verdict::Nothing);
    assert_eq!(f.take_log(), ["release 2"]);
    let waiting: usize = f.pool.borrow().snapshot().iter().map(|k| k.waiting).sum();
    assert_eq!(waiting, 0, "it left the queue");
    on_event(&f, &first, Event::Done(Some(sender())));
    assert_eq!(f.state(conn), Some(State::Idle), "nobody waits");

    // On a stream: the stream alone ends.
    let (f, key) = Fake::new(10);
    let (streamed, session) = f.on_session(key, "GET");
    assert_eq!(abort(&f, &streamed), Verdict::Nothing);
    assert_eq!(f.take_log(), ["release 1", "sessions idle"]);
    assert!(f.open_sessions.borrow().contains_key(&session));

    // On a connection of its own, which requests waited for as a session: it closes, and
    // they are routed again.
    let (f, key) = Fake::new(10);
    let req = f.request(key, "GET", 0.0);
    route(&f, &req);
    let conn = req.place().conn().unwrap();
    f.pending.borrow_mut().insert(conn);
    f.take_log();
    abort(&f, &req);
    assert_eq!(
        f.take_log(),
        ["release 1".to_owned(), format!("end {conn}")]
    );
    assert!(!req.face.held.get());
    // An end reached twice ends once.
    abort(&f, &req);
    req.finish();
    req.fail(&reset());
    assert_eq!(f.take_log(), Vec::<String>::new());
}

#[test]
fn an_abort_while_waiting_for_a_stream_leaves_the_wait() {
    let (f, key) = Fake::new(10);
    f.http2.set(true);
    let [first, waits] = f.routed(key);
    assert_eq!(waits.place(), Place::StreamWait);
    assert_eq!(f.sessions.borrow().usage(key).waiting, 1);
    assert_eq!(abort(&f, &waits), Verdict::Nothing);
    assert_eq!(
        f.sessions.borrow().usage(key).waiting,
        0,
        "it left the wait"
    );
    f.take_log();
    connected(&f, 1, first.id, Ok(facts(None, Some(sender()))));
    assert_eq!(
        f.take_log(),
        ["up 1", "announce 1", "session 1", "sending 1 on 1"],
        "no stream for it"
    );
}

#[test]
fn a_passed_headers_deadline_fails_the_request_once() {
    let (f, key) = Fake::new(10);
    // Longer than an exchange keeps itself: this thread keeps it.
    let req = f.request(key, "GET", 60_000.0);
    route(&f, &req);
    let conn = req.place().conn().unwrap();
    f.set_state(conn, State::Active);
    f.take_log();
    req.arm(&f);
    assert_eq!(f.take_log(), ["watch"]);
    let now = Instant::now();
    assert!(sweep(&f, &req, now), "still running");
    assert!(!sweep(&f, &req, now + Duration::from_secs(61)));
    assert_eq!(
        f.take_log(),
        [
            "error ERR_HYPERAGENT_HEADERS_TIMEOUT".to_owned(),
            format!("end {conn}"),
            format!("done {conn} Nothing"),
            "release 1".into(),
        ]
    );
    assert!(!sweep(&f, &req, now + Duration::from_secs(120)));
    assert_eq!(f.take_log(), Vec::<String>::new());

    // A head in time: the deadline is not watched any more.
    let req = f.request(key, "GET", 60_000.0);
    route(&f, &req);
    req.arm(&f);
    on_event(&f, &req, head(None));
    f.take_log();
    assert!(!sweep(&f, &req, now + Duration::from_secs(61)));
    assert_eq!(f.take_log(), Vec::<String>::new());
}

#[test]
fn a_request_that_fails_before_its_exchange_is_told_its_error_and_ends() {
    let (f, key) = Fake::new(10);
    let req = f.request(key, "GET", 0.0);
    req.connecting(false).unwrap();
    req.connects(1);
    req.fail(&reset());
    assert_eq!(
        f.take_log(),
        ["error ECONNRESET", "done 0 Nothing", "release 1"]
    );
    assert!(!req.face.held.get());
}

#[test]
fn the_pool_hears_why_a_connection_in_use_closes() {
    // Kept: no reason.
    let (f, key) = Fake::new(10);
    let (req, _) = f.on_new(key);
    on_event(&f, &req, Event::Done(Some(sender())));
    assert!(f.endings.borrow().is_empty());

    // Not kept after a completed exchange (hyper gave no sender back): reset.
    let (req, conn) = f.on_new(key);
    on_event(&f, &req, Event::Done(None));
    assert_eq!(f.endings.take(), [format!("Reset {conn}")]);

    // Its exchange failed: the error first, then the close of the exchange's end.
    let (req, conn) = f.on_new(key);
    on_event(&f, &req, Event::Error(reset()));
    on_event(&f, &req, Event::Done(None));
    assert_eq!(
        f.endings.take(),
        [format!("failed ECONNRESET {conn}"), format!("Reset {conn}")]
    );

    // Aborted on its connection.
    let (req, conn) = f.on_new(key);
    abort(&f, &req);
    assert_eq!(f.endings.take(), [format!("Aborted {conn}")]);

    // Kept by hyper, and not by the pool (keep-alive off): unkept.
    let (mut f, key) = Fake::new(10);
    f.policy.keep_alive = false;
    let (req, conn) = f.on_new(key);
    on_event(&f, &req, Event::Done(Some(sender())));
    assert_eq!(f.endings.take(), [format!("Unkept {conn}")]);
}
