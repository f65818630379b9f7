//! What a tree node shows of its object, by kind, as Argo CD's controller fills it: the
//! rollout revision, `link.argocd.argoproj.io/*` links, a Pod's images, status reason,
//! node, containers, restarts and requests, a Service's selector and load balancer, an
//! Ingress's backends and URLs.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::documents::{InfoItem, LoadBalancerIngress, NetworkingInfo, ResourceRef};
use crate::quantity::milli_value;

/// The annotation prefix of a node's links (Argo CD's `AnnotationKeyLinkPrefix`).
pub const LINK_PREFIX: &str = "link.argocd.argoproj.io/";

/// The annotation that turns an Ingress's own URLs off.
pub const IGNORE_DEFAULT_LINKS: &str = "argocd.argoproj.io/ignore-default-links";

/// The details of one node: info lines, networking, images.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct NodeDetails {
    /// Info lines, in Argo CD's order.
    pub info: Vec<InfoItem>,
    /// Networking.
    pub networking: Option<NetworkingInfo>,
    /// A Pod's images, sorted.
    pub images: Vec<String>,
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn item(name: &str, value: impl Into<String>) -> InfoItem {
    InfoItem {
        name: name.to_owned(),
        value: value.into(),
    }
}

/// The details of `obj` (group and kind from its `apiVersion` and `kind`).
pub fn details(obj: &Value) -> NodeDetails {
    let mut d = NodeDetails::default();
    let annotations = string_map(obj.pointer("/metadata/annotations"));
    let revision = [
        "deployment.kubernetes.io/revision",
        "rollout.argoproj.io/revision",
    ]
    .iter()
    .find_map(|a| annotations.get(*a))
    .map(|t| t.parse::<i64>().unwrap_or(0))
    .or_else(|| obj.get("revision").and_then(Value::as_i64))
    .unwrap_or(0);
    if revision > 0 {
        d.info.push(item("Revision", format!("Rev:{revision}")));
    }
    let links: Vec<String> = annotations
        .iter()
        .filter(|(k, _)| k.starts_with(LINK_PREFIX))
        .filter(|(_, v)| is_web_url(v.split_once('|').map_or(v.as_str(), |(_, url)| url)))
        .map(|(_, v)| v.clone())
        .collect();
    if !links.is_empty() {
        d.networking = Some(NetworkingInfo {
            external_urls: links,
            ..NetworkingInfo::default()
        });
    }
    let api_version = str_at(obj, "/apiVersion").unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = str_at(obj, "/kind").unwrap_or_default();
    match (group, kind) {
        ("", "Pod") => pod(obj, &mut d),
        ("", "Service") => service(obj, &mut d),
        ("extensions" | "networking.k8s.io", "Ingress") => {
            ingress(obj, group, version, &annotations, &mut d)
        }
        _ => {}
    }
    d
}

/// Only http(s) links are shown (Argo CD refuses `javascript:` and other schemes).
fn is_web_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    (lower.starts_with("http://") || lower.starts_with("https://")) && lower.len() > 8
}

fn links_of(d: &NodeDetails) -> Vec<String> {
    d.networking
        .as_ref()
        .map(|n| n.external_urls.clone())
        .unwrap_or_default()
}

fn load_balancer(obj: &Value) -> Vec<LoadBalancerIngress> {
    obj.pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            if let Some(h) = i.get("hostname").and_then(Value::as_str) {
                Some(LoadBalancerIngress {
                    hostname: h.to_owned(),
                    ip: String::new(),
                })
            } else {
                i.get("ip")
                    .and_then(Value::as_str)
                    .map(|ip| LoadBalancerIngress {
                        ip: ip.to_owned(),
                        hostname: String::new(),
                    })
            }
        })
        .collect()
}

fn service(obj: &Value, d: &mut NodeDetails) {
    let ingress = if str_at(obj, "/spec/type") == Some("LoadBalancer") {
        load_balancer(obj)
    } else {
        Vec::new()
    };
    d.networking = Some(NetworkingInfo {
        target_labels: string_map(obj.pointer("/spec/selector")),
        ingress,
        external_urls: links_of(d),
        ..NetworkingInfo::default()
    });
}

fn ingress(
    obj: &Value,
    group: &str,
    version: &str,
    annotations: &BTreeMap<String, String>,
    d: &mut NodeDetails,
) {
    let namespace = str_at(obj, "/metadata/namespace").unwrap_or_default();
    let lb = load_balancer(obj);
    let service_of = |backend: &Value| -> Option<String> {
        let name = if group == "networking.k8s.io" && version == "v1" {
            backend.pointer("/service/name")
        } else {
            backend.get("serviceName")
        };
        name.and_then(Value::as_str).map(str::to_owned)
    };
    let mut targets = BTreeSet::new();
    if let Some(name) = obj.pointer("/spec/backend").and_then(service_of) {
        targets.insert(name);
    }
    let tls = obj.pointer("/spec/tls").and_then(Value::as_array);
    let mut urls = BTreeSet::new();
    for rule in obj
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let host = rule
            .get("host")
            .and_then(Value::as_str)
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                lb.iter()
                    .map(|i| {
                        if i.hostname.is_empty() {
                            &i.ip
                        } else {
                            &i.hostname
                        }
                    })
                    .find(|h| !h.is_empty())
                    .cloned()
            });
        for path in rule
            .pointer("/http/paths")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(name) = path.get("backend").and_then(service_of) {
                targets.insert(name);
            }
            let Some(host) = &host else { continue };
            let scheme = if tls.is_some_and(|t| {
                t.iter().any(|t| {
                    t.get("secretName").is_some_and(|s| !s.is_null())
                        || t.get("host").and_then(Value::as_str) == Some(host.as_str())
                })
            }) {
                "https"
            } else {
                "http"
            };
            let sub = path
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .trim_end_matches('*');
            urls.insert(format!("{scheme}://{host}{sub}"));
        }
    }
    let mut external_urls = links_of(d);
    if annotations.get(IGNORE_DEFAULT_LINKS).map(String::as_str) != Some("true") {
        external_urls.extend(urls);
    }
    d.networking = Some(NetworkingInfo {
        target_refs: targets
            .into_iter()
            .map(|name| ResourceRef {
                kind: "Service".to_owned(),
                namespace: namespace.to_owned(),
                name,
                ..ResourceRef::default()
            })
            .collect(),
        ingress: lb,
        external_urls,
        ..NetworkingInfo::default()
    });
}

fn is_terminal(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

/// A Pod's requests as Kubernetes counts them: the containers' sum, or the largest init
/// container's if larger, in milli-units, by resource name.
pub fn pod_requests(pod: &Value) -> BTreeMap<String, i64> {
    let sum_of = |list: &str| {
        let mut sum: BTreeMap<String, i64> = BTreeMap::new();
        let mut max_init: BTreeMap<String, i64> = BTreeMap::new();
        for c in pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for (name, q) in c
                .pointer("/resources/requests")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                let v = q.as_str().map_or(0, milli_value);
                *sum.entry(name.clone()).or_default() += v;
                let m = max_init.entry(name.clone()).or_default();
                *m = (*m).max(v);
            }
        }
        (sum, max_init)
    };
    let (mut requests, _) = sum_of("containers");
    let (_, init) = sum_of("initContainers");
    for (name, v) in init {
        let r = requests.entry(name).or_default();
        *r = (*r).max(v);
    }
    requests
}

fn pod(obj: &Value, d: &mut NodeDetails) {
    let spec = |p: &str| obj.pointer(&format!("/spec/{p}"));
    let containers = spec("containers").and_then(Value::as_array);
    let inits = spec("initContainers").and_then(Value::as_array);
    let images: BTreeSet<String> = inits
        .into_iter()
        .flatten()
        .chain(containers.into_iter().flatten())
        .filter_map(|c| c.get("image").and_then(Value::as_str).map(str::to_owned))
        .collect();
    d.images = images.into_iter().collect();
    let phase = str_at(obj, "/status/phase").unwrap_or_default();
    let mut reason = str_at(obj, "/status/reason")
        .filter(|r| !r.is_empty())
        .unwrap_or(phase)
        .to_owned();
    let total = containers.map_or(0, Vec::len);
    let mut ready = 0;
    let mut restarts = 0;
    let mut initializing = false;
    let init_statuses = obj
        .pointer("/status/initContainerStatuses")
        .and_then(Value::as_array);
    let init_count = inits.map_or(0, Vec::len);
    for (i, c) in init_statuses.into_iter().flatten().enumerate() {
        restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        let terminated = c.pointer("/state/terminated");
        let waiting = c.pointer("/state/waiting/reason").and_then(Value::as_str);
        if terminated
            .and_then(|t| t.get("exitCode"))
            .and_then(Value::as_i64)
            == Some(0)
        {
            continue;
        }
        reason = if let Some(t) = terminated {
            match t
                .get("reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
            {
                Some(r) => format!("Init:{r}"),
                None => format!(
                    "Init:ExitCode:{}",
                    t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                ),
            }
        } else if let Some(w) = waiting.filter(|w| !w.is_empty() && *w != "PodInitializing") {
            format!("Init:{w}")
        } else {
            format!("Init:{i}/{init_count}")
        };
        initializing = true;
        break;
    }
    if !initializing {
        let mut running = false;
        let statuses = obj
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array);
        for c in statuses.into_iter().flatten().rev() {
            restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
            let state = |p: &str| c.pointer(&format!("/state/{p}"));
            let nonempty = |v: Option<&Value>| {
                v.and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
            };
            if let Some(w) = nonempty(state("waiting/reason")) {
                reason = w;
            } else if let Some(t) = nonempty(state("terminated/reason")) {
                reason = t;
            } else if let Some(t) = state("terminated") {
                reason = format!(
                    "ExitCode:{}",
                    t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                );
            } else if c.get("ready").and_then(Value::as_bool) == Some(true)
                && state("running").is_some()
            {
                running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && running {
            reason = "Running".to_owned();
        }
    }
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        if str_at(obj, "/status/reason") == Some("NodeLost") {
            reason = "Unknown".to_owned();
        } else if !is_terminal(phase) {
            reason = "Terminating".to_owned();
        }
    }
    if !reason.is_empty() {
        d.info.push(item("Status Reason", reason));
    }
    d.info.push(item(
        "Node",
        str_at(obj, "/spec/nodeName").unwrap_or_default(),
    ));
    d.info.push(item("Containers", format!("{ready}/{total}")));
    if restarts > 0 {
        d.info.push(item("Restart Count", restarts.to_string()));
    }
    if !is_terminal(phase) {
        let requests = pod_requests(obj);
        for name in ["cpu", "memory"] {
            let v = requests.get(name).copied().unwrap_or(0);
            d.info.push(item(name, v.to_string()));
        }
    }
    d.networking = Some(NetworkingInfo {
        labels: string_map(obj.pointer("/metadata/labels")),
        external_urls: links_of(d),
        ..NetworkingInfo::default()
    });
}
