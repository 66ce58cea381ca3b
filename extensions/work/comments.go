package work

import (
	"context"
	"errors"
)

// CommentInsertParams describes one comment to add (the comments area replaces this stub).
type CommentInsertParams struct {
	Issue *Issue
	Body  string
	// AuthorType is user, agent or system; empty derives it from the context's actor.
	AuthorType string
	// OnBehalfOfUserID is set when an agent writes for a user.
	OnBehalfOfUserID string
}

// Comment is one issue comment.
type Comment struct {
	ID string `json:"id"`
}

// commentInsert adds a comment, records activity and requests the wakes a comment causes.
// It is shared by POST /api/issues/{id}/comments, PATCH /api/issues/{id} with "comment"
// and the comments.add method.
func (w *Work) commentInsert(ctx context.Context, p *CommentInsertParams) (*Comment, error) {
	return nil, errors.New("comments are not implemented yet")
}
