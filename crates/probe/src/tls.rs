//! TLS for `https://` targets (rustls with the ring provider): the client configuration
//! (the platform's trusted roots, or no verification with `--insecure`) and the handshake
//! on a connected socket, timed as its own phase.
//!
//! Only the client side; the probe's timing around it stays on plain blocking sockets, so
//! the handshake's time is the time of its round trips and of the crypto, nothing else.

use std::io::{self, Read, Write};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};

/// A client configuration for one target host.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tls({:?})", self.name)
    }
}

impl Tls {
    /// `host` as in the URL (a name or an IP address). With `insecure`, any certificate is
    /// accepted (signatures of the handshake are still checked); otherwise it must chain to
    /// a root the platform trusts (rustls-native-certs: /etc/ssl/certs, SSL_CERT_FILE,
    /// SSL_CERT_DIR) and name `host`.
    pub fn new(host: &str, insecure: bool) -> Result<Tls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let config = if insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth()
        } else {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(
                    "no trusted root certificate found on this system (install ca-certificates, \
                     or set SSL_CERT_FILE; --insecure skips verification)"
                        .into(),
                );
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| format!("'{host}' is not a TLS server name: {e}"))?;
        Ok(Tls {
            config: Arc::new(config),
            name,
        })
    }

    /// Runs the handshake on `sock` (connected); the connection is ready for
    /// [`Stream`] afterwards.
    pub fn handshake<S: Read + Write>(&self, sock: &mut S) -> io::Result<ClientConnection> {
        let mut conn = ClientConnection::new(self.config.clone(), self.name.clone())
            .map_err(io::Error::other)?;
        while conn.is_handshaking() {
            conn.complete_io(sock)?;
        }
        Ok(conn)
    }
}

/// Whether an I/O error from the handshake is a certificate the client does not trust.
pub fn is_certificate_error(e: &io::Error) -> bool {
    matches!(
        e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()),
        Some(rustls::Error::InvalidCertificate(_))
    )
}

/// Whether an I/O error comes from TLS itself (an alert, a protocol error), not the socket.
pub fn is_tls_error(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some())
}

/// `--insecure`: accepts any certificate, still verifying the handshake's signatures with
/// the certificate's key (so the handshake is the real one, only trust is skipped).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
