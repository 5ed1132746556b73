package redlock

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlab/redlock/quorum"
)

// resourceKey keys the hash that logs and span errors show instead of a
// resource name: random per process, so the hash is stable within the
// process (one lock's records can be followed) and says nothing outside it.
var resourceKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// resourceHash is the short keyed hash of resource: "#" and 12 hex digits.
func resourceHash(resource string) string {
	m := hmac.New(sha256.New, resourceKey)
	m.Write([]byte(resource))
	var sum [sha256.Size]byte
	return "#" + hex.EncodeToString(m.Sum(sum[:0])[:6])
}

// redact replaces resource in msg (an error's text) by its label, if the
// user maps resources to labels, and its hash. The quoted name (how errors
// print it) is always replaced; the bare name (in a key, say) when it is
// at least 4 bytes long, so that a short name does not garble the text.
func redact(msg, resource string, label func(string) string) string {
	if resource == "" {
		return msg
	}
	id := resourceHash(resource)
	if label != nil {
		id = label(resource) + id
	}
	msg = strings.ReplaceAll(msg, strconv.Quote(resource), strconv.Quote(id))
	if len(resource) >= 4 {
		msg = strings.ReplaceAll(msg, resource, id)
	}
	return msg
}

// logResource is a log record's resource attribute: its hash by default;
// with Options.ResourceLabel the label too; with Options.LogResourceNames
// the name itself. Computed only if the handler formats the record.
func (l *Locker) logResource(resource string) slog.Attr {
	return slog.Any("resource", logRes{resource, l})
}

type logRes struct {
	name string
	l    *Locker
}

func (r logRes) LogValue() slog.Value {
	switch {
	case r.l.opts.LogResourceNames:
		return slog.StringValue(r.name)
	case r.l.opts.ResourceLabel != nil:
		return slog.StringValue(r.l.opts.ResourceLabel(r.name) + resourceHash(r.name))
	}
	return slog.StringValue(resourceHash(r.name))
}

// logErr is a log record's err attribute: the error's text, with the
// resource's name replaced as logResource shows it.
func (l *Locker) logErr(err error, resource string) slog.Attr {
	return slog.Any("err", logErrText{err, resource, l})
}

type logErrText struct {
	err      error
	resource string
	l        *Locker
}

func (e logErrText) LogValue() slog.Value {
	if e.err == nil {
		return slog.StringValue("")
	}
	if e.l.opts.LogResourceNames {
		return slog.StringValue(e.err.Error())
	}
	return slog.StringValue(redact(e.err.Error(), e.resource, e.l.opts.ResourceLabel))
}

// noQuorumEvery bounds the warning of acquisitions retried while fewer
// than a majority of masters answer: one per Locker per interval.
const noQuorumEvery = 10 * time.Second

// noQuorumAfter is how many acquisition rounds in a row without a majority
// answering come before the warning.
const noQuorumAfter = 3

// noteRound counts acquisition rounds in a row that got fewer than a
// majority of answers (ok or refused: masters down, or mistyped addresses),
// and warns after noQuorumAfter of them: once, then at most once per
// noQuorumEvery. err is the round's failure, nil when it acquired.
func (l *Locker) noteRound(ctx context.Context, resource string, err *Error) {
	if err == nil || len(err.Masters) == 0 || err.Count(quorum.OK)+err.Count(quorum.Refused) >= l.need {
		if l.noQuorumRounds.Load() != 0 {
			l.noQuorumRounds.Store(0)
		}
		return
	}
	now := l.env.now().UnixNano()
	n := l.noQuorumRounds.Add(1)
	if n == 1 {
		l.noQuorumSince.Store(now)
	}
	last := l.noQuorumWarned.Load()
	if n < noQuorumAfter || last != 0 && now-last < int64(noQuorumEvery) || !l.noQuorumWarned.CompareAndSwap(last, now) {
		return
	}
	l.log.WarnContext(ctx, "redlock: acquisitions keep failing: fewer than a majority of masters answer (check their addresses and health)",
		l.logResource(resource), "rounds", n, "since", time.Duration(now-l.noQuorumSince.Load()), l.logErr(err, resource))
}

// unconfirmed counts the masters a release round sent to that did not
// answer (they get the release when they answer again).
func unconfirmed(res quorum.Result) int {
	n := 0
	for _, r := range res.Replies {
		if r.Outcome != quorum.OK && r.Outcome != quorum.Refused && r.Err != errSkipped {
			n++
		}
	}
	return n
}
