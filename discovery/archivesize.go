package discovery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tfmirror/tfmirror/v2/addrs"
)

// ArchiveSize learns the size of the archive at rawURL (a download_url of
// p's origin) without downloading it, for an origin whose package
// metadata does not state it: a GET of its first byte (Range: bytes=0-0),
// whose 206 answer's Content-Range states the total. A HEAD is not used:
// many pre-signed release URLs are signed for GET only. An origin that
// ignores the range and answers 200 gives the size in its Content-Length,
// and its body is not read. A size it returns is more than 0. Errors are
// as OpenArchive's; an answer that states no size, or 0 bytes, is an
// *OriginError.
func (c *Client) ArchiveSize(ctx context.Context, p addrs.Provider, rawURL string) (n int64, err error) {
	tr := c.downloads.tr
	if err := tr.checkHost(p.Hostname); err != nil {
		return 0, err
	}
	r, err := downloadRequest(p, OpArchiveSize, rawURL)
	if err != nil {
		return 0, err
	}
	r.firstByte = true
	start := time.Now()
	defer tr.observe(p.Hostname, OpArchiveSize, start, &err)
	resp, _, end, err := tr.send(ctx, r, tr.requestContext(ctx))
	if err != nil {
		return 0, err
	}
	defer end()
	defer drain(resp.Body)
	r.u = resp.Request.URL
	switch resp.StatusCode {
	case http.StatusPartialContent:
		n, err = contentRangeTotal(resp.Header.Get("Content-Range"))
	case http.StatusOK:
		n, err = resp.ContentLength, nil
		switch {
		case n < 0:
			err = errors.New("the answer states no size (no Content-Length)")
		case n == 0:
			// No archive is empty (a zip holds at least its end
			// record), as a Content-Range total of 0 is refused.
			err = errors.New("the answer states a size of 0 bytes (Content-Length: 0)")
		}
	default:
		return 0, originError(r, resp.StatusCode, statusError(resp.StatusCode))
	}
	if err == nil && n > c.downloads.maxArchiveBytes {
		err = fmt.Errorf("%w: %d bytes exceeds %d (%s)", ErrTooLarge, n, c.downloads.maxArchiveBytes, maxArchiveSetting)
	}
	if err != nil {
		return 0, originError(r, 0, err)
	}
	return n, nil
}

// contentRangeTotal reads the complete length of "bytes 0-0/TOTAL". Its
// errors do not quote h: the header is the host's text, which may echo
// the request and the credential it carried.
func contentRangeTotal(h string) (int64, error) {
	rest, ok := strings.CutPrefix(h, "bytes ")
	_, total, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return 0, errors.New("the Content-Range is not bytes FIRST-LAST/TOTAL")
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil || n <= 0 {
		return 0, errors.New("the Content-Range's total is not a size")
	}
	return n, nil
}
