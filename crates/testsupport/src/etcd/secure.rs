//! TLS and authentication for a test etcd: a CA (the fake API server's generator, one PKI
//! per server), etcd's server certificate and a client certificate signed by it, and a
//! second, unrelated CA, all written as PEM files in the fixture's directory; and enabling
//! authentication with `etcdctl`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;

use super::{EtcdError, Local, io};

/// The PEM files of a secured test etcd ([`super::EtcdServer::start_secured`]).
#[derive(Debug, Clone)]
pub struct EtcdTlsFiles {
    /// The CA that signed etcd's server certificate and [`EtcdTlsFiles::client_cert`].
    pub ca: PathBuf,
    /// A client certificate etcd accepts (its common name, `fleetshard-test-client`, is
    /// no etcd user).
    pub client_cert: PathBuf,
    /// Its private key.
    pub client_key: PathBuf,
    /// A CA that signed nothing etcd has: a client trusting only it must refuse etcd.
    pub other_ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
}

impl EtcdTlsFiles {
    /// etcd's flags serving these certificates and requiring a client certificate.
    pub(super) fn server_args(&self) -> Vec<String> {
        vec![
            format!("--cert-file={}", self.server_cert.display()),
            format!("--key-file={}", self.server_key.display()),
            "--client-cert-auth".into(),
            format!("--trusted-ca-file={}", self.ca.display()),
        ]
    }
}

/// Generates the certificates and writes them under `dir`.
pub(super) fn write_files(dir: &Path) -> Result<EtcdTlsFiles, EtcdError> {
    let pki_err = |e: fleetshard_kube_sim::FakeApiError| EtcdError::Io {
        what: "generating etcd's certificates".into(),
        source: std::io::Error::other(e.to_string()),
    };
    let pki = fleetshard_kube_sim::generate_pki("fleetshard test etcd CA").map_err(pki_err)?;
    let other = fleetshard_kube_sim::generate_pki("fleetshard unrelated CA").map_err(pki_err)?;
    let files = EtcdTlsFiles {
        ca: dir.join("ca.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client-key.pem"),
        other_ca: dir.join("other-ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server-key.pem"),
    };
    for (path, text) in [
        (&files.ca, pki.material.ca_pem.clone()),
        (&files.client_cert, pki.material.client_cert_pem.clone()),
        (&files.client_key, pki.material.client_key_pem.clone()),
        (&files.other_ca, other.material.ca_pem),
        (
            &files.server_cert,
            pem("CERTIFICATE", pki.server_cert.as_ref()),
        ),
        (
            &files.server_key,
            pem("PRIVATE KEY", pki.server_key.secret_pkcs8_der()),
        ),
    ] {
        std::fs::write(path, text).map_err(io(format!("writing {}", path.display())))?;
    }
    Ok(files)
}

/// DER as a PEM block.
fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

impl Local {
    /// Adds the user `root` with `password` and enables authentication (etcdctl, over the
    /// client certificate).
    pub(super) fn enable_auth(&self, password: &str) -> Result<(), EtcdError> {
        let tls = self
            .tls
            .as_ref()
            .ok_or(EtcdError::NotLocal("enable_auth"))?;
        let etcdctl = self.binary.with_file_name("etcdctl");
        let etcdctl = if etcdctl.is_file() {
            etcdctl
        } else {
            PathBuf::from("etcdctl")
        };
        for args in [
            vec![
                "user".to_owned(),
                "add".into(),
                format!("root:{password}"),
                "--interactive=false".into(),
            ],
            vec!["auth".into(), "enable".into()],
        ] {
            let out = Command::new(&etcdctl)
                .env("ETCDCTL_API", "3")
                .arg(format!(
                    "--endpoints=https://127.0.0.1:{}",
                    self.client_port
                ))
                .arg(format!("--cacert={}", tls.ca.display()))
                .arg(format!("--cert={}", tls.client_cert.display()))
                .arg(format!("--key={}", tls.client_key.display()))
                .args(&args)
                .stdin(Stdio::null())
                .output()
                .map_err(io(format!("running {}", etcdctl.display())))?;
            if !out.status.success() {
                return Err(EtcdError::Io {
                    what: format!("etcdctl {}", args[0..2].join(" ")),
                    source: std::io::Error::other(format!(
                        "{}: {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    )),
                });
            }
        }
        Ok(())
    }
}
