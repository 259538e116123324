#!/usr/bin/env bash
# Validates the deploy files with what runs without a container engine or a cluster:
#   systemd-analyze verify      deploy/systemd/strom.service (against the built binary)
#   helm lint + helm template   deploy/helm/strom, default values and values-single-node.yaml
#   deploy/check (Go)           the rendered manifests decoded strictly into the Kubernetes
#                               API types; compose.yaml through compose-go (the Compose
#                               Specification's schema); the Containerfile through BuildKit's
#                               parser
#   python3                     the dashboard is JSON with panels; rules, Prometheus and Grafana
#                               provisioning files are YAML (promtool is not installable here)
# Installs helm from the Go module proxy when it is missing (pinned; a few minutes of build).
# What cannot be checked here (building and running the image, installing the chart in a
# cluster) is listed in deploy/README.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
HELM_VERSION=v3.18.6
bin="${STROM_BIN:-target/release/strom}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== systemd-analyze verify"
[[ -x "$bin" ]] || { echo "$bin missing: cargo build --release -p strom" >&2; exit 1; }
# The unit names /usr/local/bin/strom; verify the same unit against the built binary.
sed "s#/usr/local/bin/strom#$(realpath "$bin")#" deploy/systemd/strom.service >"$work/strom.service"
systemd-analyze verify "$work/strom.service"
echo "ok  strom.service"

echo "== deploy/check (Go: Kubernetes types, compose-go, BuildKit parser)"
(cd deploy/check && go build -o "$work/check" .)
"$work/check" dockerfile deploy/Containerfile
"$work/check" compose deploy/compose/compose.yaml

echo "== helm lint, helm template"
helm="$(command -v helm || true)"
if [[ -z "$helm" ]]; then
    GOFLAGS=-p=1 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    helm="$(go env GOPATH)/bin/helm"
fi
"$helm" lint deploy/helm/strom
"$helm" lint deploy/helm/strom -f deploy/helm/strom/values-single-node.yaml
"$helm" template strom deploy/helm/strom --namespace streaming >"$work/cluster.yaml"
"$helm" template strom deploy/helm/strom --namespace streaming \
    -f deploy/helm/strom/values-single-node.yaml --set tls.secretName=strom-tls >"$work/single.yaml"
"$helm" template strom deploy/helm/strom --namespace streaming \
    --set tls.secretName=strom-tls --set tls.clientAuth=required >"$work/tls.yaml"
"$work/check" k8s "$work/cluster.yaml" "$work/single.yaml" "$work/tls.yaml"
grep -q 'listeners=PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9094' "$work/tls.yaml"
grep -q 'ssl.keystore.location=/etc/strom/tls/tls-combined.pem' "$work/tls.yaml"
grep -q 'ssl.truststore.location=/etc/strom/tls/ca.crt' "$work/tls.yaml"
! grep -q STROM_LISTEN "$work/tls.yaml"
echo "ok  TLS values render an SSL listener on the mounted Secret"
grep -q 'controller_quorum_voters=0@strom-0.strom-headless.streaming.svc:9093,1@strom-1.strom-headless.streaming.svc:9093,2@strom-2.strom-headless.streaming.svc:9093' "$work/cluster.yaml"
! grep -q controller_quorum_voters "$work/single.yaml"
echo "ok  quorum voters rendered for 3 pods, none for a single node"

echo "== dashboard, alerts, prometheus config"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["panels"], "no panels"' deploy/grafana/strom-dashboard.json
python3 - deploy/prometheus/strom-alerts.yml deploy/compose/prometheus.yml \
    deploy/compose/grafana/provisioning/datasources/prometheus.yaml \
    deploy/compose/grafana/provisioning/dashboards/strom.yaml <<'PY'
import sys, yaml  # Debian's python3-yaml
for f in sys.argv[1:]:
    d = yaml.safe_load(open(f))
    assert isinstance(d, dict) and d, f"{f}: empty"
rules = yaml.safe_load(open(sys.argv[1]))["groups"]
assert all(r.get("expr") and (r.get("alert") or r.get("record")) for g in rules for r in g["rules"])
print("ok  dashboard, alert rules, prometheus and grafana provisioning")
PY
echo "all deploy checks passed"
