// helm_render: renders a Helm chart the way `helm template` does, for the
// offline validation of deploy/helm (scripts/validate_manifests.sh). Helm
// itself is not packaged in Debian 12; its template engine is Go's
// text/template with the sprig function library (Debian's
// golang-github-masterminds-sprig-dev, sprig 3.2.3, the version Helm 3.x
// vendors) plus a few functions of its own, written again here as Helm
// defines them: include, tpl, required, toYaml, fromYaml, toJson, lookup
// (always empty: there is no cluster).
//
// Usage: helm_render CHART_DIR [RELEASE_NAME [NAMESPACE]] [-f VALUES.yaml]...
// Prints every rendered template that is not blank as a YAML document
// ("---\n# Source: <chart>/templates/<file>\n..."), as helm template does.
// Exit 1 with the template error (e.g. a `fail` or `required`).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"gopkg.in/yaml.v3"
)

// Values are read as Helm reads them: YAML turned into JSON, numbers kept as
// json.Number (chartutil.ReadValues).
func readYAML(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	js, err := json.Marshal(jsonable(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	out := map[string]interface{}{}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil && string(js) != "null" {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return out, nil
}

// jsonable turns yaml.v3's map[string]interface{} trees (and any
// map[interface{}]interface{}) into what encoding/json accepts.
func jsonable(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		for k, e := range t {
			t[k] = jsonable(e)
		}
		return t
	case map[interface{}]interface{}:
		m := map[string]interface{}{}
		for k, e := range t {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []interface{}:
		for i, e := range t {
			t[i] = jsonable(e)
		}
		return t
	}
	return v
}

// merge: b's keys over a's, maps merged deeply (coalescing, as helm -f).
func merge(a, b map[string]interface{}) map[string]interface{} {
	for k, bv := range b {
		if bm, ok := bv.(map[string]interface{}); ok {
			if am, ok := a[k].(map[string]interface{}); ok {
				a[k] = merge(am, bm)
				continue
			}
		}
		a[k] = bv
	}
	return a
}

func toYAML(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func main() {
	args := os.Args[1:]
	var positional, valueFiles []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-f" && i+1 < len(args) {
			valueFiles = append(valueFiles, args[i+1])
			i++
		} else {
			positional = append(positional, args[i])
		}
	}
	if len(positional) < 1 || len(positional) > 3 {
		fmt.Fprintln(os.Stderr, "usage: helm_render CHART_DIR [RELEASE_NAME [NAMESPACE]] [-f VALUES.yaml]...")
		os.Exit(2)
	}
	chartDir := positional[0]
	release, namespace := "release-name", "default"
	if len(positional) > 1 {
		release = positional[1]
	}
	if len(positional) > 2 {
		namespace = positional[2]
	}
	if err := render(chartDir, release, namespace, valueFiles); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func render(chartDir, release, namespace string, valueFiles []string) error {
	chartMeta, err := readYAML(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return err
	}
	values, err := readYAML(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	for _, f := range valueFiles {
		over, err := readYAML(f)
		if err != nil {
			return err
		}
		values = merge(values, over)
	}
	// .Chart's fields are Chart.yaml's keys, capitalised (Name, Version,
	// AppVersion, ...), as in Helm's chart.Metadata.
	chart := map[string]interface{}{}
	for k, v := range chartMeta {
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}
	name := fmt.Sprint(chart["Name"])
	top := map[string]interface{}{
		"Values": values,
		"Chart":  chart,
		"Release": map[string]interface{}{
			"Name": release, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": "v1.36.0", "Major": "1", "Minor": "36"},
		},
	}

	files, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	t := template.New("gotpl").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	includedNames := map[string]int{}
	funcs["include"] = func(n string, data interface{}) (string, error) {
		if includedNames[n] > 1000 {
			return "", fmt.Errorf("rendering template has a nested reference name: %s", n)
		}
		includedNames[n]++
		defer func() { includedNames[n]-- }()
		var buf strings.Builder
		if err := t.ExecuteTemplate(&buf, n, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		c, err := t.Clone()
		if err != nil {
			return "", err
		}
		c, err = c.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf strings.Builder
		if err := c.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return nil, fmt.Errorf(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, fmt.Errorf(msg)
		}
		return v, nil
	}
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	funcs["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	funcs["lookup"] = func(string, string, string, string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	t.Funcs(funcs)
	var rendered []string
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		rel := name + "/templates/" + filepath.Base(f)
		if _, err := t.New(rel).Parse(string(text)); err != nil {
			return err
		}
		if !strings.HasPrefix(filepath.Base(f), "_") {
			rendered = append(rendered, rel)
		}
	}
	var out strings.Builder
	for _, rel := range rendered {
		var buf strings.Builder
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": rel, "BasePath": name + "/templates"}
		if err := t.ExecuteTemplate(&buf, rel, data); err != nil {
			return err
		}
		doc := strings.ReplaceAll(buf.String(), "<no value>", "")
		if strings.TrimSpace(doc) == "" {
			continue
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", rel, strings.TrimSpace(doc))
	}
	fmt.Print(out.String())
	return nil
}
