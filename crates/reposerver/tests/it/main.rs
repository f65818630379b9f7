//! fleetshard-reposerver against testsupport's fake repo-server: requests decoded by field
//! number (`wire.rs`), transport and errors (`transport.rs`).

mod transport;
mod wire;

use fleetshard_reposerver::{ClientConfig, RepoServerClient, TlsMode};
use fleetshard_testsupport::repo_server::{FakeRepoServer, Transport};

/// A plain-text fake and a client of it.
pub async fn plaintext() -> (FakeRepoServer, RepoServerClient) {
    let fake = FakeRepoServer::start(Transport::Plaintext).await.unwrap();
    let mut config = ClientConfig::new(&fake.addr());
    config.tls = TlsMode::Plaintext;
    let client = RepoServerClient::new(&config).unwrap();
    (fake, client)
}
