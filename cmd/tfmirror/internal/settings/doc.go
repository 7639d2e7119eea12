// Package settings is tfmirror's one table of settings (Table) and the
// values they set (Config): each setting's flag, environment variable,
// default, help and documentation, whether it is a secret and whether
// what it names is read again while serving; the flag syntaxes they use
// (List, ByteSize, Days); the configuration file, whose attributes are
// the settings named in snake case and whose policy block it hands over
// undecoded (ReadFile, File.Policy); reading flags, then TFMIRROR_
// variables, then the file, then defaults, and where each value came
// from (Load, Effective); reading the file again while serving, refused
// whole or put in force with the hooks of what is not a setting
// (Reloader, Hook); and the checks of the values (Config.Validate).
//
// serve's flags, the flags other commands share with serve, serve's
// --help and docs/configuration.md all come from the table. It is not
// the wiring: what a value builds (the engine's limits, retention's rules,
// the keys an import trusts) is the command's business, in cmd/tfmirror.
package settings
