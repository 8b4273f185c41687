package api

import "github.com/shoal-db/shoal/api/wire"

// The API's answers and problem details are defined in api/wire, which the
// Go client reads them with; these are their names here.
type (
	Problem          = wire.Problem
	PlacementView    = wire.PlacementView
	PartitionView    = wire.PartitionView
	PlacementTable   = wire.PlacementTable
	NodeStatus       = wire.NodeStatus
	RollbackList     = wire.RollbackList
	ClusterAnswer    = wire.ClusterAnswer
	PartitionSummary = wire.PartitionSummary
	VoterStatus      = wire.VoterStatus
	MoveStatus       = wire.MoveStatus
	MovesUnknown     = wire.MovesUnknown
)

// The problem types Shoal answers with.
const (
	TypeInvalidName        = wire.TypeInvalidName
	TypeInvalidDocument    = wire.TypeInvalidDocument
	TypeInvalidFilter      = wire.TypeInvalidFilter
	TypeInvalidQuery       = wire.TypeInvalidQuery
	TypeQueryTooExpensive  = wire.TypeQueryTooExpensive
	TypeInvalidHeader      = wire.TypeInvalidHeader
	TypeUnauthorized       = wire.TypeUnauthorized
	TypeForbidden          = wire.TypeForbidden
	TypeNotFound           = wire.TypeNotFound
	TypeRouteNotFound      = wire.TypeRouteNotFound
	TypeMethodNotAllowed   = wire.TypeMethodNotAllowed
	TypeAlreadyExists      = wire.TypeAlreadyExists
	TypePreconditionFailed = wire.TypePreconditionFailed
	TypeBodyTooLarge       = wire.TypeBodyTooLarge
	TypeDocumentTooLarge   = wire.TypeDocumentTooLarge
	TypeUnavailable        = wire.TypeUnavailable
	TypeTimeout            = wire.TypeTimeout
	TypeInternal           = wire.TypeInternal
)
