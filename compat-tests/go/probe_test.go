//go:build probe

// A probe, not a test: `compat-tests/probe-diff.py` runs it against Strom and Kafka and
// prints where their DescribeConfigs (topic and broker, with synonyms and documentation)
// and ApiVersions answers differ. FINDINGS.md records what it showed.
package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProbe(t *testing.T) {
	adm := franzAdmin(t)
	topic := topicName("probe", "cfg")
	franzCreate(t, adm, topic, 1, nil)
	cl, _ := kgo.NewClient(kgo.SeedBrokers(bootstrap(t)))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string]any{}
	for _, res := range []struct {
		typ  kmsg.ConfigResourceType
		name string
	}{{kmsg.ConfigResourceTypeTopic, topic}, {kmsg.ConfigResourceTypeBroker, "0"}} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = res.typ
		r.ResourceName = res.name
		req.Resources = append(req.Resources, r)
		req.IncludeSynonyms = true
		req.IncludeDocumentation = true
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, rr := range resp.Resources {
			m["__error"] = fmt.Sprint(rr.ErrorCode)
			for _, c := range rr.Configs {
				v := "<null>"
				if c.Value != nil {
					v = *c.Value
				}
				doc := 0
				if c.Documentation != nil {
					doc = len(*c.Documentation)
				}
				syn := []string{}
				for _, s := range c.ConfigSynonyms {
					sv := "<null>"
					if s.Value != nil {
						sv = *s.Value
					}
					syn = append(syn, s.Name+"="+sv+"/"+s.Source.String())
				}
				sort.Strings(syn)
				b, _ := json.Marshal(map[string]any{"v": v, "src": c.Source.String(), "ro": c.ReadOnly, "sens": c.IsSensitive, "type": c.ConfigType.String(), "doc": doc > 0, "syn": syn})
				m[c.Name] = string(b)
			}
		}
		out[res.typ.String()] = m
	}
	avReq := kmsg.NewPtrApiVersionsRequest()
	avReq.ClientSoftwareName = "probe"
	avReq.ClientSoftwareVersion = "1"
	av, err := avReq.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	apis := map[string]string{}
	for _, k := range av.ApiKeys {
		apis[kmsg.NameForKey(k.ApiKey)] = fmt.Sprintf("%d-%d", k.MinVersion, k.MaxVersion)
	}
	out["apis"] = apis
	b, _ := json.MarshalIndent(out, "", " ")
	if err := os.WriteFile(os.Getenv("PROBE_OUT"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
