package main

// The most read of each kind of file the operator hands the mirror
// (internal/inputfile.ReadOperator and ReadTrusted refuse a longer one,
// naming it and the bound): well past what such a file holds, and short
// of what a mistake (a log, an archive, a device behind a link) would
// have the mirror hold in memory.
const (
	// maxKeyFileBytes: a key of raw bytes (--url-signing-key-file) or a
	// PEM private key (--tls-key): tens of bytes to a few KiB.
	maxKeyFileBytes = 64 << 10
	// maxDataDirKeyBytes: the URL-signing key generated in the data
	// directory (url-signing.key), 32 bytes as tfmirror writes it.
	maxDataDirKeyBytes = 4 << 10
	// maxTokensFileBytes: client tokens, one per line, with comments:
	// some 250,000 tokens of 64 characters; as much as an HCL file of the
	// operator's (internal/hclfile.MaxBytes).
	maxTokensFileBytes = 16 << 20
	// maxKeyringBytes: ASCII-armored OpenPGP keys with their signatures
	// (the export key, trusted and publisher keys): as airgap reads them.
	maxKeyringBytes = 1 << 20
	// maxCertFileBytes: PEM certificates, a chain (--tls-cert) or a CA
	// bundle (--origin-ca-file; a system's whole bundle is some 200 KiB).
	maxCertFileBytes = 4 << 20
)
