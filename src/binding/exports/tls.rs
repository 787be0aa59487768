//! TLS settings from JavaScript: an HTTPS key's `tls.connect` options, this thread's default
//! trust (Node's default certificates), and the configuration of sessions to proxies over TLS.

use std::cell::RefCell;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::transport::tls::{TlsConfig, TlsOptions, Trust};

/// `tls.connect` options of an HTTPS key, already normalised by `lib/tls.js`.
#[napi(object)]
pub struct TlsOptionsJs {
    pub ca: Option<Vec<Buffer>>,
    pub certs: Option<Vec<Buffer>>,
    pub keys: Option<Vec<Buffer>>,
    pub pfx: Option<Vec<PfxJs>>,
    pub crl: Option<Vec<Buffer>>,
    pub reject_unauthorized: bool,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub ciphers: Option<String>,
    pub ecdh_curve: Option<String>,
    pub sigalgs: Option<String>,
    pub alpn: Option<Vec<Buffer>>,
    pub max_cached_sessions: u32,
}

/// One `pfx` entry: a PKCS#12 file and its passphrase (empty when none was given).
#[napi(object)]
pub struct PfxJs {
    pub buf: Buffer,
    pub passphrase: String,
}

/// A configuration error, for JavaScript to throw with its code.
#[napi(object)]
pub struct ErrorInfo {
    pub code: String,
    pub message: String,
}

/// The core's TLS options of `options`, with this thread's default trust.
pub fn tls_options(options: TlsOptionsJs) -> TlsOptions {
    let bytes = |v: Option<Vec<Buffer>>| {
        v.map(|list| list.into_iter().map(|b| b.to_vec()).collect::<Vec<_>>())
    };
    let certs = bytes(options.certs).unwrap_or_default();
    let keys = bytes(options.keys).unwrap_or_default();
    TlsOptions {
        ca: bytes(options.ca),
        identities: certs.into_iter().zip(keys).collect(),
        crls: bytes(options.crl).unwrap_or_default(),
        pfx: options
            .pfx
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.buf.to_vec(), p.passphrase))
            .collect(),
        default_trust: DEFAULT_TRUST.with(|t| t.borrow().clone()),
        reject_unauthorized: options.reject_unauthorized,
        min_version: options.min_version,
        max_version: options.max_version,
        ciphers: options.ciphers,
        ecdh_curve: options.ecdh_curve,
        sigalgs: options.sigalgs,
        alpn: bytes(options.alpn).unwrap_or_default(),
        max_cached_sessions: options.max_cached_sessions as usize,
    }
}

thread_local! {
    /// Node's default trust on this JavaScript thread (see [`set_default_ca`]); none until
    /// given, and on Node versions that cannot tell it.
    static DEFAULT_TRUST: RefCell<Option<Arc<Trust>>> = const { RefCell::new(None) };
    /// The TLS configurations for sessions to proxies (with and without `rejectUnauthorized`),
    /// made on first use with the default trust, and again after it changes.
    static PROXY_TLS: RefCell<[Option<Arc<TlsConfig>>; 2]> = const { RefCell::new([None, None]) };
}

/// The configuration of a session to a proxy reached over TLS: what `tls.connect` with no
/// options of its own uses (the default trust, sessions kept for resumption).
pub fn proxy_tls_config(reject_unauthorized: bool) -> Result<Arc<TlsConfig>> {
    PROXY_TLS.with(|configs| {
        let mut configs = configs.borrow_mut();
        let slot = &mut configs[usize::from(reject_unauthorized)];
        if let Some(config) = slot {
            return Ok(config.clone());
        }
        let opts = TlsOptions {
            default_trust: DEFAULT_TRUST.with(|t| t.borrow().clone()),
            reject_unauthorized,
            max_cached_sessions: 100,
            ..TlsOptions::default()
        };
        let config = Arc::new(
            TlsConfig::new(&opts).map_err(|e| Error::new(Status::GenericFailure, e.message()))?,
        );
        *slot = Some(config.clone());
        Ok(config)
    })
}

/// Sets the trust of TLS configurations made from now on without `ca`: Node's default set
/// (`tls.getCACertificates('default')`, PEM), given again whenever it changes. Returns how
/// many certificates it holds.
#[napi(catch_unwind)]
pub fn set_default_ca(certs: Vec<String>) -> u32 {
    let trust = Trust::node_default(&certs);
    let n = trust.certificates() as u32;
    DEFAULT_TRUST.with(|t| *t.borrow_mut() = Some(Arc::new(trust)));
    PROXY_TLS.with(|configs| *configs.borrow_mut() = [None, None]);
    n
}

/// The certificates of this thread's default trust that may have issued `top` (DER, the last
/// certificate a server sent): JavaScript completes the chain with the one that did, as the
/// verified chain OpenSSL reports ends at the trusted root.
#[napi(catch_unwind)]
pub fn trusted_issuers(top: Buffer) -> Vec<Buffer> {
    DEFAULT_TRUST.with(|t| match &*t.borrow() {
        Some(trust) => trust
            .issuers_of(&top)
            .into_iter()
            .map(|c| Buffer::from(c.as_ref().to_vec()))
            .collect(),
        None => Vec::new(),
    })
}
