//! The client layer that puts a cluster's EKS token on every request.
//!
//! kube refreshes an `execProviderConfig` token inside its own auth layer, which only a
//! program it runs can feed; an in-process token goes in the same place, as a layer of
//! the cluster's client: each request asks [`EksTokens`] (a cache lookup, a new token near
//! expiry), so the watches and caches of a cluster keep their client while the token
//! changes underneath.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use fleetshard_manifest::AwsAuth;
use http::{HeaderValue, Request};
use kube::client::Body;
use tower::{BoxError, Layer, Service, ServiceExt as _};

use super::EksTokens;

/// Adds `Authorization: Bearer <EKS token>` to every request.
#[derive(Clone)]
pub(crate) struct BearerLayer {
    pub tokens: Arc<EksTokens>,
    pub auth: AwsAuth,
}

impl<S> Layer<S> for BearerLayer {
    type Service = Bearer<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Bearer {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            tokens: self.tokens.clone(),
            auth: self.auth.clone(),
        }
    }
}

/// The service of [`BearerLayer`]. The inner service (kube's, not `Clone`) is shared
/// behind a lock held only while it is readied and called, not while it answers.
pub(crate) struct Bearer<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    tokens: Arc<EksTokens>,
    auth: AwsAuth,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, R> Service<Request<Body>> for Bearer<S>
where
    S: Service<Request<Body>, Response = R> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    R: Send + 'static,
{
    type Response = R;
    type Error = BoxError;
    type Future = BoxFuture<Result<R, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness of the inner service is awaited in `call`, under the lock.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let (inner, tokens, auth) = (self.inner.clone(), self.tokens.clone(), self.auth.clone());
        Box::pin(async move {
            let token = tokens.token(&auth).await.map_err(|e| {
                BoxError::from(format!(
                    "EKS token for cluster {} (config.awsAuthConfig): {e}",
                    auth.cluster_name
                ))
            })?;
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.secret()))
                .map_err(|_| BoxError::from("the EKS token is not a valid header value"))?;
            value.set_sensitive(true);
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, value);
            let answer = {
                let mut service = inner.lock().await;
                let ready = service.ready().await.map_err(Into::into)?;
                ready.call(request)
            };
            answer.await.map_err(Into::into)
        })
    }
}
