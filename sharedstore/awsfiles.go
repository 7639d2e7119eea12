package sharedstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/tfmirror/tfmirror/v2/internal/inputfile"
)

// awsFile is a file of the environment that the AWS SDK reads for the
// store, named by the variable that names it.
type awsFile struct {
	variable string // AWS_CA_BUNDLE, ...
	path     string
	def      bool // the SDK's default, the variable not set
}

// awsFiles are the files of this process's environment that the AWS SDK
// reads with plain reads, which wait for ever on a FIFO or a device that
// never ends: the shared config and credentials files (AWS_CONFIG_FILE
// and AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/config and
// ~/.aws/credentials), the CA bundle (AWS_CA_BUNDLE), and the token files
// read when credentials are fetched (AWS_WEB_IDENTITY_TOKEN_FILE,
// AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE).
func awsFiles() []awsFile {
	var out []awsFile
	for _, v := range []struct {
		variable string
		defaults []string // the SDK's, read when the variable is not set
	}{
		{"AWS_CONFIG_FILE", config.DefaultSharedConfigFiles},
		{"AWS_SHARED_CREDENTIALS_FILE", config.DefaultSharedCredentialsFiles},
		{"AWS_CA_BUNDLE", nil},
		{"AWS_WEB_IDENTITY_TOKEN_FILE", nil},
		{"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", nil},
	} {
		if path := os.Getenv(v.variable); path != "" {
			out = append(out, awsFile{variable: v.variable, path: path})
			continue
		}
		for _, path := range v.defaults {
			out = append(out, awsFile{variable: v.variable, path: path, def: true})
		}
	}
	return out
}

// checkAWSFiles refuses a file of awsFiles that is there but is no
// regular file (a FIFO, a socket, a device, a directory): the SDK would
// wait on it for ever, holding up a start, a reload or config check. It
// opens each as the operator's files are opened (inputfile.OpenOperator:
// through a link, never waiting) and reads nothing. The null device is
// taken, as reading it ends at once: AWS_CONFIG_FILE=/dev/null is the
// usual way to have the SDK read no such file. A file that is not there
// is left to the SDK, which ignores a missing config or credentials file
// and refuses a missing CA bundle. Those files taken, the profile the SDK
// reads from them (AWS_PROFILE, else default) is read, and the files it
// names are judged the same way: its ca_bundle, and the
// web_identity_token_file of it and of its source profiles. The error
// names the variable or the profile's setting, and the path, never what
// a file holds.
func checkAWSFiles(ctx context.Context) error {
	var errs []error
	judge := func(what, path string) {
		file, _, err := inputfile.OpenOperator(path)
		if err == nil {
			file.Close()
			return
		}
		var kind *inputfile.KindError
		if !errors.As(err, &kind) || isNullDevice(path) {
			return // not there, or not readable: the SDK's to judge
		}
		errs = append(errs, fmt.Errorf("shared store: AWS config: %s %s is %s, not a regular file: refused (the AWS SDK would wait on it for ever)", what, path, kind.Kind))
	}
	files := awsFiles()
	var configFiles, credentialsFiles []string
	for _, f := range files {
		what := f.variable
		if f.def {
			what = "the AWS SDK's default for " + f.variable
		}
		judge(what, f.path)
		switch f.variable {
		case "AWS_CONFIG_FILE":
			configFiles = append(configFiles, f.path)
		case "AWS_SHARED_CREDENTIALS_FILE":
			credentialsFiles = append(credentialsFiles, f.path)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	profile := cmp.Or(os.Getenv("AWS_PROFILE"), "default")
	sc, err := config.LoadSharedConfigProfile(ctx, profile, func(o *config.LoadSharedConfigOptions) {
		o.ConfigFiles, o.CredentialsFiles = configFiles, credentialsFiles
	})
	if err != nil {
		return nil // no such profile, or one the SDK refuses: the SDK says so
	}
	if sc.CustomCABundle != "" {
		judge("the ca_bundle of AWS profile "+profile, sc.CustomCABundle)
	}
	for s, depth := &sc, 0; s != nil && depth < 16; s, depth = s.Source, depth+1 {
		if s.WebIdentityTokenFile != "" {
			judge("the web_identity_token_file of AWS profile "+s.Profile, s.WebIdentityTokenFile)
		}
	}
	return errors.Join(errs...)
}

// isNullDevice says whether path leads to the null device.
func isNullDevice(path string) bool {
	a, err := os.Stat(path)
	if err != nil || a.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	b, err := os.Stat(os.DevNull)
	return err == nil && os.SameFile(a, b)
}
