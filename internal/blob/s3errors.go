package blob

import (
	"errors"
	"net"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// LocationError is an s3:// location that could not be read: its URL and the Reason in plain
// words — "no such object", "no such bucket", "access denied", "cannot reach the S3 endpoint" —
// never the SDK's text, which Err keeps for logs. An absent object's error also wraps
// [ErrNotFound].
type LocationError struct {
	URL, Reason string
	Err         error
}

func (e *LocationError) Error() string { return e.URL + ": " + e.Reason }
func (e *LocationError) Unwrap() error { return e.Err }

// locationError is the one mapping of an S3 request's error to plain words, for the location
// url: an object's when object is true, else a bucket's (or prefix's), for which a 404 means the
// bucket is missing.
func locationError(url string, object bool, err error) error {
	reason := "S3 refused the request"
	var apiErr smithy.APIError
	code := ""
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	status := 0
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		status = resp.HTTPStatusCode()
	}
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	switch {
	case code == "NoSuchBucket" || (!object && status == http.StatusNotFound):
		reason = "no such bucket"
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		reason = "no such object"
		if !errors.Is(err, ErrNotFound) {
			err = errors.Join(ErrNotFound, err)
		}
	case code == "AccessDenied" || code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
		status == http.StatusForbidden || status == http.StatusUnauthorized:
		reason = "access denied"
	case errors.As(err, &sendErr) || errors.As(err, &netErr):
		reason = "cannot reach the S3 endpoint"
	}
	return &LocationError{URL: url, Reason: reason, Err: err}
}
