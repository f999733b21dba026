// Command olm-validate runs the operator-framework's own bundle validators on an
// OLM bundle directory (the one holding manifests/ and metadata/):
//
//	olm-validate [-k8s-version 1.34] [-suites default,operatorhub,...] BUNDLE_DIR
//
// It prints one line per finding ("ERROR [suite] object: detail" or "WARN ...") and
// a summary, and exits 1 when any suite reports an error (or, with -strict, a warning).
// hack/validate-bundle.sh builds it from the published Go module pinned in
// manager/versions.py.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
	"sigs.k8s.io/yaml"
)

// suites maps the names accepted by -suites to the library's validators.
var suites = map[string]interfaces.Validator{
	"csv":                   validation.ClusterServiceVersionValidator,
	"crd":                   validation.CustomResourceDefinitionValidator,
	"bundle":                validation.BundleValidator,
	"operatorhub":           validation.OperatorHubV2Validator,
	"standard-capabilities": validation.StandardCapabilitiesValidator,
	"standard-categories":   validation.StandardCategoriesValidator,
	"good-practices":        validation.GoodPracticesValidator,
	"deprecated-apis":       validation.AlphaDeprecatedAPIsValidator,
	"objects":               validation.ObjectValidator,
}

// defaultSuites: the metadata check, the suites `operator-sdk bundle validate` runs by
// default (csv, crd, bundle), then the optional ones (OperatorHub, good practices, ...).
const defaultSuites = "metadata,csv,crd,bundle,operatorhub,standard-capabilities," +
	"standard-categories,good-practices,deprecated-apis,objects"

func main() {
	k8sVersion := flag.String("k8s-version", "", "Kubernetes version the deprecated-API and "+
		"OperatorHub suites check against (default: the CSV's minKubeVersion)")
	selected := flag.String("suites", defaultSuites, "comma-separated suites to run")
	strict := flag.Bool("strict", false, "fail on warnings too (except accepted ones)")
	acceptedFile := flag.String("accepted", "", "file of accepted warnings: one substring a "+
		"line, each after a '#' comment saying why it is accepted")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s [flags] BUNDLE_DIR\nsuites: %s\n",
			os.Args[0], strings.Join(suiteNames(), ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	accepted, err := readAccepted(*acceptedFile)
	if err != nil {
		fmt.Printf("ERROR [usage] %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(flag.Arg(0), strings.Split(*selected, ","), *k8sVersion, *strict, accepted))
}

// readAccepted reads the accepted-warnings file: non-empty lines that are not comments.
func readAccepted(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var patterns []string
	for _, line := range strings.Split(string(content), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	return patterns, nil
}

func run(dir string, names []string, k8sVersion string, strict bool, accepted []string) int {
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil || bundle == nil {
		fmt.Printf("ERROR [load] %s: %v\n", dir, err)
		return 1
	}
	objects := bundle.ObjectsToValidate()
	if k8sVersion != "" {
		// The library reads optional values from a map passed among the objects.
		objects = append(objects, map[string]string{"k8s-version": k8sVersion})
	}
	errorCount, warningCount, acceptedCount := 0, 0, 0
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name == metadataSuite {
			findings := validateMetadata(dir)
			errorCount += report(name, errors.ManifestResult{Name: "metadata/annotations.yaml"}, findings)
			continue
		}
		validator, ok := suites[name]
		if !ok {
			fmt.Printf("ERROR [usage] unknown suite %q (known: %s)\n", name, strings.Join(suiteNames(), ", "))
			return 2
		}
		for _, result := range validator.Validate(objects...) {
			errorCount += report(name, result, result.Errors)
			var open []errors.Error
			for _, warning := range result.Warnings {
				if matchesAny(warning.Error(), accepted) {
					fmt.Printf("WARN (accepted) [%s] %s: %s\n", name, result.Name, warning.Error())
					acceptedCount++
				} else {
					open = append(open, warning)
				}
			}
			warningCount += report(name, result, open)
		}
	}
	fmt.Printf("bundle %s (package %s, channels %s): %d suites, %d errors, %d warnings, "+
		"%d accepted warnings\n", bundle.Name, bundle.Package, strings.Join(bundle.Channels, ","),
		len(names), errorCount, warningCount, acceptedCount)
	if errorCount > 0 || (strict && warningCount > 0) {
		return 1
	}
	return 0
}

func report(suite string, result errors.ManifestResult, findings []errors.Error) int {
	for _, finding := range findings {
		level := "WARN"
		if finding.Level == errors.LevelError {
			level = "ERROR"
		}
		fmt.Printf("%s [%s] %s: %s\n", level, suite, result.Name, finding.Error())
	}
	return len(findings)
}

func matchesAny(text string, patterns []string) bool {
	for _, pattern := range patterns {
		if strings.Contains(text, pattern) {
			return true
		}
	}
	return false
}

func suiteNames() []string {
	names := []string{metadataSuite}
	for name := range suites {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// metadataSuite checks metadata/annotations.yaml, which the library reads but does not
// validate: the keys OLM needs to unpack a registry+v1 bundle image, and that the
// default channel is one of the channels.
const metadataSuite = "metadata"

// requiredAnnotations are the bundle annotations OLM reads, with the value each must
// have ("" means any non-empty value).
var requiredAnnotations = map[string]string{
	"operators.operatorframework.io.bundle.mediatype.v1": "registry+v1",
	"operators.operatorframework.io.bundle.manifests.v1": "manifests/",
	"operators.operatorframework.io.bundle.metadata.v1":  "metadata/",
	"operators.operatorframework.io.bundle.package.v1":   "",
	"operators.operatorframework.io.bundle.channels.v1":  "",
}

func validateMetadata(dir string) []errors.Error {
	path := filepath.Join(dir, "metadata", "annotations.yaml")
	content, err := os.ReadFile(path)
	if err != nil {
		return []errors.Error{errors.ErrIOError(err.Error(), path)}
	}
	var file struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(content, &file); err != nil {
		return []errors.Error{errors.ErrInvalidParse(err.Error(), path)}
	}
	var findings []errors.Error
	for _, key := range sortedKeys(requiredAnnotations) {
		want, got := requiredAnnotations[key], file.Annotations[key]
		switch {
		case got == "":
			findings = append(findings, errors.ErrFieldMissing("required bundle annotation", key, nil))
		case want != "" && got != want:
			findings = append(findings, errors.ErrFailedValidation(
				fmt.Sprintf("annotation %s must be %q", key, want), got))
		}
	}
	channels := strings.Split(file.Annotations["operators.operatorframework.io.bundle.channels.v1"], ",")
	defaultChannel := file.Annotations["operators.operatorframework.io.bundle.channel.default.v1"]
	if defaultChannel != "" && !contains(channels, defaultChannel) {
		findings = append(findings, errors.ErrFailedValidation(
			"the default channel is not one of the bundle's channels", defaultChannel))
	}
	for _, sub := range []string{"manifests", "metadata"} {
		if info, err := os.Stat(filepath.Join(dir, sub)); err != nil || !info.IsDir() {
			findings = append(findings, errors.ErrInvalidBundle("missing directory", sub+"/"))
		}
	}
	return findings
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

func contains(values []string, want string) bool {
	for _, value := range values {
		if strings.TrimSpace(value) == want {
			return true
		}
	}
	return false
}
