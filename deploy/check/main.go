// Command check validates Strom's deploy files without a container engine or a cluster
// (deploy/check.sh runs it):
//
//	check k8s FILE...      every document of rendered manifests decoded strictly into the
//	                       Kubernetes API types of its kind (unknown fields, wrong types fail)
//	check compose FILE     the compose file loaded and validated by compose-go (the
//	                       Compose Specification's schema and its model)
//	check dockerfile FILE  the Containerfile parsed into instructions by BuildKit's parser
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: check k8s|compose|dockerfile FILE...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "k8s":
		err = checkK8s(os.Args[2:])
	case "compose":
		err = checkCompose(os.Args[2])
	case "dockerfile":
		err = checkDockerfile(os.Args[2])
	default:
		err = fmt.Errorf("unknown check %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
}

type meta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

func target(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/Secret":
		return &corev1.Secret{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	}
	return nil, fmt.Errorf("no schema here for %s %s", apiVersion, kind)
}

func checkK8s(files []string) error {
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 || bytes.Equal(bytes.TrimSpace(doc), []byte("---")) {
				continue
			}
			var m meta
			if err := yaml.Unmarshal(doc, &m); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if m.Kind == "" {
				continue
			}
			obj, err := target(m.APIVersion, m.Kind)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				return fmt.Errorf("%s: %s %s: %w", f, m.Kind, m.Metadata.Name, err)
			}
			if m.Metadata.Name == "" {
				return fmt.Errorf("%s: %s without a name", f, m.Kind)
			}
			fmt.Printf("ok  %s %s\n", m.Kind, m.Metadata.Name)
			n++
		}
	}
	if n == 0 {
		return errors.New("no Kubernetes objects found")
	}
	return nil
}

func checkCompose(file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return err
	}
	project, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  filepath.Dir(abs),
		ConfigFiles: []types.ConfigFile{{Filename: abs, Content: data}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) { o.SetProjectName("strom", true) })
	if err != nil {
		return err
	}
	for _, s := range project.Services {
		fmt.Printf("ok  service %s\n", s.Name)
	}
	return nil
}

func checkDockerfile(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		return err
	}
	stages, _, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return err
	}
	for _, s := range stages {
		fmt.Printf("ok  stage %q from %s: %d instructions\n", s.Name, s.BaseName, len(s.Commands))
	}
	return nil
}

