package telemetry_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/quorumlab/redlock/lab"
	"github.com/quorumlab/redlock/redlock"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// logRecorder is a slog.Handler that keeps every record, at every level.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
	traced  []bool      // records[i] came with a context holding a span
	attrs   []slog.Attr // from WithAttrs
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r)
	h.traced = append(h.traced, trace.SpanContextFromContext(ctx).IsValid())
	return nil
}
func (h *logRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &logRecorder{records: nil, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h *logRecorder) WithGroup(string) slog.Handler { return h }

func (h *logRecorder) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.records...)
}

// flat returns every attribute of r as key=value strings, groups and
// LogValuers resolved, errors as their text.
func flat(r slog.Record) []string {
	var out []string
	var walk func(prefix string, a slog.Attr)
	walk = func(prefix string, a slog.Attr) {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindGroup {
			for _, g := range v.Group() {
				walk(prefix+a.Key+".", g)
			}
			return
		}
		out = append(out, prefix+a.Key+"="+v.String())
	}
	r.Attrs(func(a slog.Attr) bool { walk("", a); return true })
	return out
}

// spanTexts returns every text a span carries: its name, status
// description, attributes, and its events' names and attributes.
func spanTexts(s sdktrace.ReadOnlySpan) []string {
	out := []string{"name=" + s.Name(), "status=" + s.Status().Description}
	add := func(where string, kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			out = append(out, where+string(kv.Key)+"="+kv.Value.Emit())
		}
	}
	add("", s.Attributes())
	for _, e := range s.Events() {
		out = append(out, "event="+e.Name)
		add("event "+e.Name+": ", e.Attributes)
	}
	return out
}

// No span (name, status, attribute, event attribute: exception.message
// included), no metric attribute and no log record carries the resource
// name or a token, on a successful and on a failed acquisition, unless
// ResourceLabel opts in.
func TestNoResourceNameOrTokenAnywhere(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	logs := &logRecorder{}
	l, reader, rec := setup(t, c, redlock.Options{Logger: slog.New(logs)})
	other, _, _ := setup(t, c, redlock.Options{})
	const secret = "customer-4711-secret"
	resource := "invoice:" + secret
	lk, err := l.TryLock(t.Context(), resource) // succeeds
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Extend(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := lk.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	held, err := other.TryLock(t.Context(), resource)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	waitAll(t, c, resource, held.Token())
	_, err = l.TryLock(t.Context(), resource) // fails: held by another
	if !errors.Is(err, redlock.ErrNotAcquired) || !strings.Contains(err.Error(), secret) {
		t.Fatalf("TryLock on a held resource: %v (the error returned to the caller names the resource)", err)
	}
	if err := l.Do(t.Context(), resource, func(context.Context) error { return nil }, redlock.WithTTL(-1)); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Do with an invalid TTL: %v", err)
	}
	secrets := []string{secret, lk.Token(), held.Token()}
	var failed bool
	for _, s := range rec.Ended() {
		if s.Status().Code.String() == "Error" {
			failed = true
		}
		for _, text := range spanTexts(s) {
			for _, sec := range secrets {
				if strings.Contains(text, sec) {
					t.Errorf("span %s carries %q: %s", s.Name(), sec, text)
				}
			}
		}
	}
	if !failed {
		t.Fatal("no span recorded the failed acquisition")
	}
	noSecrets(t, reader, rec, secrets...)
	recs := logs.all()
	if len(recs) < 3 {
		t.Fatalf("%d log records, want at least acquired, released and acquire failed", len(recs))
	}
	for _, r := range recs {
		for _, text := range append(flat(r), "msg="+r.Message) {
			for _, sec := range secrets {
				if strings.Contains(text, sec) {
					t.Errorf("log record %q carries %q: %s", r.Message, sec, text)
				}
			}
		}
	}
}

// With a ResourceLabel, spans say the label where the error named the
// resource: the user chose what the label shows.
func TestResourceLabelInSpanErrors(t *testing.T) {
	c := lab.ForTest(t, 3, nil)
	holder, _, _ := setup(t, c, redlock.Options{})
	l, _, rec := setup(t, c, redlock.Options{ResourceLabel: func(r string) string {
		kind, _, _ := strings.Cut(r, ":")
		return kind
	}})
	lk, err := holder.TryLock(t.Context(), "invoice:secret-9")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock(context.Background())
	waitAll(t, c, "invoice:secret-9", lk.Token())
	if _, err := l.TryLock(t.Context(), "invoice:secret-9"); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("TryLock: %v", err)
	}
	var msg string
	for _, s := range rec.Ended() {
		for _, e := range s.Events() {
			for _, kv := range e.Attributes {
				if kv.Key == "exception.message" {
					msg = kv.Value.AsString()
				}
			}
		}
	}
	if !strings.Contains(msg, "invoice") || strings.Contains(msg, "secret-9") {
		t.Fatalf("exception.message %q: want the label, not the name", msg)
	}
}
