// Package consumer checks what a user of the published modules gets. Its
// test writes the repository's modules, as they are in the checkout, into
// a local module proxy (a folder served with GOPROXY=file://) at the tag
// the modules require of each other. Then, outside the repository and
// with no workspace, it builds a module that imports only the library,
// and installs the two commands from that proxy as the README and
// docs/releasing.md say.
package consumer
