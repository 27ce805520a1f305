package server

import (
	"net/http"

	"enrichd/store"
)

type batchResponse struct {
	Data *store.Batch `json:"data"`
}

// handleCreateBatch takes a CSV or JSON Lines file, checks every row, and makes the
// batch: 202 with the batch, whose rows get their tasks from the feeder; 200 and
// Idempotent-Replayed when the Idempotency-Key names a batch made before.
func handleCreateBatch(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, err := idempotencyKey(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		format, err := uploadFormat(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		q := r.URL.Query()
		ask, err := parseBatchAsk(q.Get("object_type"), q.Get("enrich"), q.Get("on_error"))
		if err != nil {
			s.error(w, r, err)
			return
		}
		body, up, err := readUpload(r, format)
		if err != nil {
			s.error(w, r, err)
			return
		}
		b, replayed, err := s.createBatch(r.Context(), principal(r).OrgID, body, up, ask, q.Get("name"), key)
		if err != nil {
			s.error(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/batches/"+b.ID)
		status := http.StatusAccepted
		if replayed {
			w.Header().Set("Idempotent-Replayed", "true")
			status = http.StatusOK
		}
		encode(w, status, batchResponse{Data: b})
	})
}

func handleListBatches(s *Server) http.Handler {
	type response struct {
		Data  []*store.Batch `json:"data"`
		Total int64          `json:"total"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, size, err := pageParams(r)
		if err != nil {
			s.error(w, r, err)
			return
		}
		batches, total, err := s.db.ListBatches(r.Context(), principal(r).OrgID, page, size)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, response{Data: batches, Total: total})
	})
}

// batchOf is the request's organization's batch the path names; 404 for any other.
func (s *Server) batchOf(r *http.Request, orgID string) (*store.Batch, error) {
	return s.db.GetBatch(r.Context(), orgID, pathID(r))
}

func handleGetBatch(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := s.batchOf(r, principal(r).OrgID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		encode(w, http.StatusOK, batchResponse{Data: b})
	})
}

func handleBatchResults(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := s.batchOf(r, principal(r).OrgID)
		if err != nil {
			s.error(w, r, err)
			return
		}
		s.writeBatchResults(w, r, b, resultsFormat(r), s.error)
	})
}
